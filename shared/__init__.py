"""Common code shared by the capture, assembly and compaction services."""
