"""orch bench: a pure plan of interleaved rounds, its execution over SSH, clock pinning,
quantisation, series and statistics, the results store and its reports.
"""
