"""orch deploy: a pure plan per board (what to send, install, switch, prune), its execution over
SSH, the releases on the board, the board's facts and the verification report.
"""
