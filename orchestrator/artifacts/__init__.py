"""What a build leaves for deploy: the artifact store with its Manifest, wheel inspection (ELF
machine, GLIBC needs, tags), and the board's dependency wheels.
"""
