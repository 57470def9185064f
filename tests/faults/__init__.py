"""Fault injection (issue #8): crashes, log damage, broker outages and a full disk, against real processes."""
