"""A key job run in a process that kills itself with SIGKILL after a few batches: what a
crash, an OOM kill or a pulled plug leaves behind, for the resume tests.

    python -m tests.encryption.killed_job URL KEY_FILE JOB TENANT BATCH KILL_AFTER

``JOB`` is ``encrypt`` or ``rotate``; the process kills itself in the progress callback
of batch ``KILL_AFTER`` (which has committed by then) and never returns normally.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from store.encryption import KeyRing, encrypt_tenant, rotate_tenant_key
from store.encryption.local import LocalKeyProvider


def main(argv: list[str]) -> None:
    """Run the job of ``argv`` until batch ``KILL_AFTER``, then die by SIGKILL."""
    url, key_file, job, tenant, batch, kill_after = argv
    batches = 0

    def progress(done: int, total: int) -> None:
        nonlocal batches
        batches += 1
        if batches == int(kill_after):
            os.kill(os.getpid(), signal.SIGKILL)

    ring = KeyRing(LocalKeyProvider.from_file(key_file))
    run = {"encrypt": encrypt_tenant, "rotate": rotate_tenant_key}[job]
    asyncio.run(run(url, tenant=tenant, encryption=ring, batch_size=int(batch), progress=progress))
    raise SystemExit("the job ended before it was killed")


if __name__ == "__main__":
    main(sys.argv[1:])
