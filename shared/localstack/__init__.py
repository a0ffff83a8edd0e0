"""Embedded local stack: private runtimes, OpenViking and a local embedding server as subprocesses."""
