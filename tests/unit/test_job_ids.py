"""Job ids: version-7 UUIDs whose first 48 bits are the creation time in milliseconds."""

from __future__ import annotations

import uuid

from job_service.domain.ids import new_job_id

NOW_NS = 1_764_547_200_123_456_789  # 2025-12-01T00:00:00.123456789Z


def test_an_id_is_a_version_7_rfc_9562_uuid_carrying_its_millisecond() -> None:
    parsed = uuid.UUID(new_job_id(NOW_NS))

    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == NOW_NS // 1_000_000


def test_ids_of_later_milliseconds_sort_after_and_ids_of_one_are_distinct() -> None:
    same_ms = {new_job_id(NOW_NS) for _ in range(1000)}
    later = new_job_id(NOW_NS + 1_000_000)

    assert len(same_ms) == 1000
    assert all(later > earlier for earlier in same_ms)
