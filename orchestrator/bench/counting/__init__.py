"""``orch bench --metric instructions``: instructions retired per inference, counted by the counting
qemu on emulated boards (plan and verdict pure; ``execute`` reaches the boards)."""
