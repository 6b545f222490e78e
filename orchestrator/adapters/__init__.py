"""The only importers of docker, fabric/paramiko and subprocess: the Docker engine (local or over
SSH), SSH sessions behind the BoardSession protocol, and the local process runner.
"""
