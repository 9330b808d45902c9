"""Jobs for the local stack's process mode (tests/local/test_processes.py): each function runs from its
staged asset in processes of its own, so these modules are imported there, not only here."""
