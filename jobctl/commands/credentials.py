"""A user's own provider keys (CredentialService): put, list, delete.

``put`` reads the key from stdin, never from an argument: argv is readable by every user
of the machine (``ps``, /proc) and lands in shell history. On a terminal the key is typed
without echo; in a script it is piped (``jobctl credentials put --provider openai <
key.txt``). No answer ever carries the key, only its fingerprint.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from durable_jobs_client import AsyncJobsClient
from durable_jobs_client.protos import credential_service_pb2 as cpb

from jobctl import render
from jobctl.commands import Commands
from jobctl.exits import Exit
from jobctl.output import show
from jobctl.prompt import confirmed, secret


def register(commands: Commands) -> None:
    group = commands.group("credentials", "your own provider keys (bring your own key)")
    p = group.add("put", put, "store a provider key, read from stdin (never an argument)")
    p.add_argument("--provider", required=True, help='e.g. "openai", "deepseek"')
    p.add_argument("--label", default="", help="free text, e.g. 'team budget key'")
    group.add("list", list_credentials, "your stored keys (fingerprints only), newest first")
    p = group.add("delete", delete, "delete a stored key for good")
    p.add_argument("credential_id")


async def put(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    key = secret(f"{args.provider} API key (not echoed): ")
    stored = await client.credentials.put(args.provider, key, label=args.label)
    human = f"stored {stored.id}  {stored.provider}  {stored.fingerprint}"
    show(args, out, stored, human)
    return Exit.OK


async def list_credentials(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    found = await client.credentials.list()
    answer = cpb.ListCredentialsResponse(credentials=found)
    show(args, out, answer, render.credentials_table(found), items=found)
    return Exit.OK


async def delete(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    question = f"Delete credential {args.credential_id}? Jobs waiting to run on it will fail."
    if not args.yes and not confirmed(question):
        print("jobctl: not confirmed; the credential was kept", file=sys.stderr)
        return Exit.NOT_CONFIRMED
    await client.credentials.delete(args.credential_id)
    show(args, out, cpb.DeleteCredentialResponse(), f"deleted {args.credential_id}")
    return Exit.OK
