"""The fleet: the Ansible-style inventory, its ~/.ssh/config merge, --limit selection, and running
one job on many boards in parallel.
"""
