"""jobctl's job view and the console's job page say what a bounded GetJob left out
(Job.*_total, issue 25)."""

from __future__ import annotations

from console.render import environment
from jobctl.render.jobs import job_detail
from shared.pb.jobs.v1 import job_pb2


def a_job(**fields: object) -> job_pb2.Job:
    return job_pb2.Job(id="j1", user_id="u1", job_type="synthetic", **fields)  # type: ignore[arg-type]


def test_a_capped_job_says_how_many_of_each_list_were_left_out() -> None:
    job = a_job(
        child_job_ids=["c1", "c2"],
        child_jobs_total=5,
        artifacts=[job_pb2.Artifact(artifact_type="t", artifact_id="a")],
        artifacts_total=4,
        signals=[job_pb2.ReceivedSignal(seq=9, name="late")],
        signals_total=9,
        events=[job_pb2.JobEvent(to_status=job_pb2.JOB_STATUS_QUEUED)],
        events_total=3,
    )

    shown = job_detail(job)

    assert "c1 c2 (+3 more)" in shown
    assert "1 shown of 4" in shown
    assert "(8 earlier) #9 late" in shown
    assert "(2 earlier events not shown)" in shown


def test_a_whole_job_and_an_older_server_show_no_note() -> None:
    for total in (1, 0):  # 0: a server that does not send totals
        job = a_job(
            child_job_ids=["c1"],
            child_jobs_total=total,
            signals=[job_pb2.ReceivedSignal(seq=1, name="s")],
            signals_total=total,
            events=[job_pb2.JobEvent(to_status=job_pb2.JOB_STATUS_QUEUED)],
            events_total=total,
        )

        shown = job_detail(job)

        assert "more" not in shown and "earlier" not in shown and "shown of" not in shown


def test_the_console_job_page_says_how_many_were_left_out() -> None:
    page = environment().get_template("job.html")
    capped = a_job(
        child_job_ids=["c1"],
        child_jobs_total=3,
        events=[job_pb2.JobEvent(to_status=job_pb2.JOB_STATUS_QUEUED)],
        events_total=5,
        artifacts=[job_pb2.Artifact(artifact_type="t", artifact_id="a")],
        artifacts_total=2,
    )
    whole = a_job(child_job_ids=["c1"], child_jobs_total=1, events_total=0)

    shown = page.render(job=capped, csrf="", signed_in=True, nav="jobs")
    plain = page.render(job=whole, csrf="", signed_in=True, nav="jobs")

    assert "… 2 more" in shown
    assert "… 4 earlier events not shown" in shown
    assert "Artifacts (1 of 2)" in shown
    assert "more" not in plain and "earlier events" not in plain and "Artifacts (0)" in plain
