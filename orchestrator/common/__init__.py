"""Small facts and helpers every stage shares: ORT release numbers, aarch64 instruction sets,
file digests and capped text reads. Nothing here imports another orch package above ``errors``."""
