"""Sysroots: a board's headers and libraries, read (contents), staged (staging), kept (store), pulled from a board (pull), and turned into a target (target)."""
