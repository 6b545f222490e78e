"""The bad-input corpus: every case ends in one clear message with the right exit code.

Each case is a row of ``CASES``: files to put in a private environment (inventory, ssh_config,
known_hosts, identity files, variants, a damaged results store), the command line, the
expected exit code and words the message must contain. The CLI runs in-process
(``orchestrator.cli.main``: the same code the ``orch`` command runs, without an interpreter
start per case); a case passes only if nothing escaped as an exception, no "internal error"
was reported (orch's name for an exception it did not turn into its own error) and no
traceback was printed. ``test_cli_corpus_real_processes.py`` runs a sample of the same inputs
through real processes, pipes and file permissions.

Nothing here reaches a network or an engine: the boards are 127.0.0.1 port 1 (nothing
listens), and DOCKER_HOST points at a socket that does not exist, so a check that wrongly let
a real build through would fail at once instead of building.
"""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.bench.results import BOARD_SCHEMA, ResultStore

INVENTORY = """\
all:
  vars: {user: orch}
  hosts:
    pi01: {hostname: 127.0.0.1, port: 1}
  children:
    rpis:
      hosts:
        pi02: {hostname: 127.0.0.1, port: 1, target: rpi4}
"""
# An OpenSSH private key's shape (not a usable key: nothing connects in these tests).
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
)
RUNS = ("20260101-000000-aaaa", "20260102-000000-bbbb")
RANDOM = bytes((index * 131 + 17) % 256 for index in range(512))  # fixed "random" bytes


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    code: int
    words: tuple[str, ...]
    files: dict[str, str | bytes | Path] = field(default_factory=dict)  # a Path: a symbolic link to it
    results: Callable[[Path], None] | None = None  # damages the results store (made when given)


def case(id: str, argv: str | tuple[str, ...], code: int, *words: str, **kwargs: object) -> Case:
    parts = tuple(argv.split()) if isinstance(argv, str) else argv
    return Case(id, parts, code, words, **kwargs)  # type: ignore[arg-type]


def inventory(body: str) -> dict[str, str | bytes]:
    return {"inventory.yaml": body}


def with_key(text: str | bytes) -> dict[str, str | bytes]:
    return {
        "inventory.yaml": "all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1, identity_file: key}\n",
        "key": text,
    }


# --- the results store: made good, then damaged ----------------------------------------------


def make_store(root: Path) -> None:
    store = ResultStore(root)
    for run_id in RUNS:
        store.begin_run(run_id, command="orch bench --all-devices")
        for board in ("pi01", "pi02"):
            store.write_board(
                run_id,
                {
                    "schema": BOARD_SCHEMA,
                    "run_id": run_id,
                    "board": board,
                    "status": "ok",
                    "error": None,
                    "measurements": [
                        {
                            "key": {"variant": variant, "release": f"{variant}-1", "model": "m.onnx"},
                            "round": round_,
                            "agent": {"timing": {"latencies_ms": [1.0 + 0.01 * i for i in range(12)]}},
                        }
                        for round_ in (1, 2)
                        for variant in ("stock", "tuned")
                    ],
                },
            )
        store.finish_run(run_id, {"run_id": run_id, "command": "orch bench", "boards": {}})


def truncate(name: str, size: int = 60) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        path = root / RUNS[1] / name
        path.write_bytes(path.read_bytes()[:size])

    return damage


def replace(name: str, content: bytes, run: int = 1) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        (root / RUNS[run] / name).write_bytes(content)

    return damage


def index(content: bytes | None = None, *, schema: str | None = None) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        path = root / "index.sqlite"
        if schema is not None:
            path.unlink()
            with contextlib.closing(sqlite3.connect(path)) as db:
                db.executescript(schema)
        else:
            path.write_bytes(content if content is not None else path.read_bytes()[:100])

    return damage


def nothing(root: Path) -> None:
    pass


FOREIGN_BOARD = b'{"schema": "someone-else/3", "board": "pi01"}'
BAD_MEASUREMENT = (
    b'{"schema": "' + BOARD_SCHEMA.encode() + b'", "board": "pi01", "status": "ok", '
    b'"measurements": [{"key": {"variant": "stock"}, "agent": {"timing": {}}}]}'
)

CASES = [
    # --- inventory (more in tests/inventory/malformed/, whose test runs them through the CLI) --------
    case("inv-nul", "inventory list", 2, "inventory.yaml:3:", "NUL byte", files=inventory("all:\n  hosts:\n    a\0: {}\n")),
    case("inv-latin1", "inventory list", 2, "inventory.yaml:2:19:", "0xe9", "not UTF-8", files=inventory("all:\n  vars: {user: caf\xe9}\n".encode("latin-1"))),
    case("inv-bom-ok", "inventory list --json", 0, '"pi01"', files=inventory("\ufeff" + INVENTORY)),
    case("inv-alias-bomb", "inventory list", 2, "alias bomb", files=inventory("all:\n  hosts:\n    pi01:\n      vars:\n        a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(f"        {c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True)))),
    case("inv-deep-flow", "inventory list", 2, "inventory.yaml:1:", "exceeded maximum nesting depth", files=inventory("all: {vars: {user: " + "[" * 2000 + "]" * 2000 + "}}\n")),
    case("inv-deep-block", "inventory list", 2, "nested more than 64 levels", files=inventory("all:\n" + "".join("  " * i + f"  k{i}:\n" for i in range(80)))),
    case("inv-1000-nested-groups", "inventory list --limit g1000 --json", 0, '"deep"', files=inventory("all:\n  children:\n" + "".join(f"    g{i}: {{children: {{g{i + 1}: {{}}}}}}\n" for i in range(1000)) + "    g1000: {hosts: {deep: {hostname: 127.0.0.1}}}\n")),
    case("inv-group-cycle-long", "inventory list", 2, "makes a cycle of groups", "g0 -> g1", files=inventory("all:\n  children:\n" + "".join(f"    g{i}: {{children: {{g{(i + 1) % 300}: {{}}}}}}\n" for i in range(300)))),
    case("inv-unknown-tag", "inventory list", 2, "inventory.yaml:1:", "constructor", files=inventory("all: {vars: {user: !!python/name:os.system x}}\n")),
    case("inv-bad-int-tag", "inventory list", 2, "inventory.yaml:3:", "'zz'", files=inventory("all:\n  hosts:\n    a: {port: !!int zz}\n")),
    case("inv-two-documents", "inventory list", 2, "inventory.yaml:2:", "YAML syntax error", files=inventory("all: {}\n---\nall: {}\n")),
    case("inv-missing", ("inventory", "list", "-i", "{root}/nowhere.yaml"), 2, "nowhere.yaml: inventory file not found"),
    case("inv-dev-zero", "inventory list -i /dev/zero", 2, "/dev/zero: is a device, not a regular file: not an inventory"),
    case("sshc-dev-zero", "inventory list", 2, "ssh_config: is a device, not a regular file: not an ssh_config", files={**inventory(INVENTORY), "ssh_config": Path("/dev/zero")}),
    case("id-dev-zero", "exec --all-devices -- true", 2, "identity file /dev/zero is not a private key (larger than 1 MiB", files=inventory("all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1, identity_file: /dev/zero}\n")),
    case("kh-dev-zero", "exec --all-devices -- true", 2, "known_hosts: larger than 64 MiB", files={**inventory(INVENTORY), "home/known_hosts": Path("/dev/zero")}),
    case("var-dev-zero", "build --target lab --variant x --dry-run", 2, "variants.yaml: larger than 64 MiB", files={"home/variants.yaml": Path("/dev/zero")}),
    case("inv-directory", ("inventory", "list", "-i", "{root}"), 2, "is a directory, not an inventory file"),
    case("inv-show-unknown", "inventory show pi99", 2, "no board named 'pi99'", "the inventory has boards: pi01, pi02", files=inventory(INVENTORY)),
    # --- addresses: a hostname is a hostname or an IP address, a port is 1..65535 -----------------------
    *[
        case(f"inv-hostname-{label}", "inventory list", 2, "inventory.yaml:3:", "key 'hostname'", "is not a hostname or IP address", files=inventory(f"all:\n  hosts:\n    pi01: {{hostname: '{value}'}}\n"))
        for label, value in [
            ("command-substitution", "$(reboot)"), ("backticks", "`id`"), ("semicolon", "pi01;reboot"),
            ("ampersand", "pi01&"), ("pipe", "a|b"), ("quote", 'a"b'), ("empty-label", "pi01..lab"),
            ("bad-ipv4", "192.168.1.300"), ("bad-ipv6", "fe80::1::2"), ("brackets", "[::1]"), ("dash-end", "pi01-.lab"),
        ]
    ],
    case("inv-hostname-space", "inventory list", 2, "key 'hostname'", "without spaces", files=inventory("all:\n  hosts:\n    pi01: {hostname: 'a b'}\n")),
    case("inv-hostname-ipv6-ok", "inventory list --json", 0, '"fe80::1%eth0"', files=inventory("all:\n  hosts:\n    pi01: {hostname: 'fe80::1%eth0'}\n")),
    case("inv-board-name-not-a-hostname", "inventory list", 2, "inventory.yaml:3:", "host 'a..b'", "no 'hostname'", files=inventory("all:\n  hosts:\n    a..b: {}\n")),
    *[
        case(f"inv-proxy-jump-{label}-{argv.split()[0]}", argv, 2, "inventory.yaml:3:", "key 'proxy_jump'", *words, files=inventory(f"all:\n  hosts:\n    pi01: {{hostname: 127.0.0.1, port: 1, proxy_jump: '{value}'}}\n"))
        for label, value, words in [
            ("port-text", "jump:abc", ("port 'abc' is not a port number",)),
            ("port-range", "jump:99999", ("port '99999' is out of range (1..65535)",)),
            ("port-zero", "u@jump:0", ("port '0' is out of range",)),
            ("ipv6-port-text", "[::1]:abc", ("port 'abc' is not a port number",)),
            ("ipv6-unclosed", "[::1:22", ("[ADDRESS]:PORT",)),
            ("second-entry", "a:22,b:70000", ("'b:70000'", "out of range")),
            ("host", "$(id):22", ("is not a hostname or address",)),
            ("empty-port", "jump:", ("the port after ':' is missing",)),
        ]
        for argv in ("inventory list", "exec --all-devices -- true")
    ],
    case("inv-proxy-jump-ok", "inventory list --json", 0, '"u@[::1]:2222,jump"', files=inventory("all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, proxy_jump: 'u@[::1]:2222,jump'}\n")),
    case("sshc-proxy-jump-port", "inventory list", 2, "ssh_config: ProxyJump for 'pi01' is not usable", "'99999' is out of range", files={**inventory("all:\n  hosts:\n    pi01: {}\n"), "ssh_config": "Host pi01\n  ProxyJump j:99999\n"}),
    case("sshc-hostname-shell", "inventory list", 2, "ssh_config: HostName for 'pi01' is not usable", "'$'", files={**inventory("all:\n  hosts:\n    pi01: {}\n"), "ssh_config": "Host pi01\n  HostName $(reboot)\n"}),
    # --- every bad key of the file, each with its line, in one run -----------------------------------------
    case("inv-every-bad-key", "inventory list", 2, "4 problems in", "inventory.yaml:3: host 'pi01': unknown key 'prot'", "inventory.yaml:4: host 'pi02': key 'hostname'", "inventory.yaml:7: group 'rpis' vars: unknown key 'usr'", "inventory.yaml:9: host 'pi03': key 'port' must be", files=inventory("all:\n  hosts:\n    pi01: {prot: 22}\n    pi02: {hostname: 'a;b'}\n  children:\n    rpis:\n      vars: {usr: x}\n      hosts:\n        pi03: {port: 0}\n")),
    # --- --limit / --host / --group -----------------------------------------------------------------
    case("limit-dangling-and", ("inventory", "list", "--limit", "rpis:&"), 2, "'&' must be followed by the board or group to intersect with", files=inventory(INVENTORY)),
    case("limit-dangling-not", ("inventory", "list", "--limit", "rpis:!"), 2, "'!' must be followed by the board or group to exclude", files=inventory(INVENTORY)),
    case("limit-two-operators", ("inventory", "list", "--limit", "rpis:&!pi01"), 2, "has two operators", files=inventory(INVENTORY)),
    case("limit-empty", ("inventory", "list", "--limit", ":,"), 2, "names no board or group", files=inventory(INVENTORY)),
    case("limit-unknown", ("inventory", "list", "--limit", "rpiz"), 2, "'rpiz' is neither a board nor a group", "did you mean 'rpis'?", files=inventory(INVENTORY)),
    case("limit-glob-nothing", ("inventory", "list", "--limit", "zz*"), 2, "selects no board", files=inventory(INVENTORY)),
    case("host-unknown", "exec --host pi9 -- true", 2, "--host: no board named 'pi9'", files=inventory(INVENTORY)),
    case("group-unknown", "bench --group rpiz --dry-run", 2, "--group: no group named 'rpiz'", files=inventory(INVENTORY)),
    # --- ssh_config ---------------------------------------------------------------------------------
    case("sshc-match-host-works", "inventory show pi01 --json", 0, ".ssh/id_x", files={**inventory(INVENTORY), "ssh_config": "Match host x\n  User bob\nHost *\n  IdentityFile ~/.ssh/id_x\n"}),
    case("sshc-match-all-works", "inventory show pi01 --json", 0, '"name": "pi01"', files={**inventory(INVENTORY), "ssh_config": "Match all\n  Compression yes\n"}),
    case("sshc-match-unknown", "inventory list", 2, "ssh_config:2:", "Match criterion 'tagged'", files={**inventory(INVENTORY), "ssh_config": "Host a\nMatch tagged x\n  User bob\n"}),
    case("sshc-match-empty", "inventory list", 2, "ssh_config:1:", "Match needs a criterion", files={**inventory(INVENTORY), "ssh_config": "Match\n"}),
    case("sshc-match-missing-arg", "inventory list", 2, "ssh_config:3:", "Missing parameter", files={**inventory(INVENTORY), "ssh_config": "Host a\n  User b\nMatch host\n"}),
    case("sshc-unclosed-quote", "inventory list", 2, "ssh_config:1:", "No closing quotation", files={**inventory(INVENTORY), "ssh_config": 'Match exec "true\n'}),
    case("sshc-bare-host", "inventory list", 2, "ssh_config:2:", "Unparsable line Host", files={**inventory(INVENTORY), "ssh_config": "# mine\nHost\n"}),
    case("sshc-nul", "inventory list", 2, "ssh_config:2:", "NUL byte", files={**inventory(INVENTORY), "ssh_config": b"Host a\nUser \0\n"}),
    case("sshc-not-utf8", "inventory list", 2, "ssh_config:1:", "not UTF-8", files={**inventory(INVENTORY), "ssh_config": b"Host \xff\n"}),
    case("sshc-bad-port", "inventory list", 2, "Port for", "1..65535", files={**inventory("all:\n  hosts:\n    pi01: {}\n"), "ssh_config": "Host pi01\n  Port 99999\n"}),
    case("sshc-directory", "inventory list", 2, "cannot read ssh_config", files={**inventory(INVENTORY), "ssh_config/x": "Host a\n"}),
    # --- known_hosts (orch's) -----------------------------------------------------------------------
    case("kh-garbage-line", "exec --all-devices -- true", 2, "known_hosts:2:", "damaged line", files={**inventory(INVENTORY), "home/known_hosts": "# boards\ngarbage\n"}),
    case("kh-bad-base64", "exec --all-devices -- true", 2, "known_hosts:1:", "Invalid base64", files={**inventory(INVENTORY), "home/known_hosts": "[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI\n"}),
    case("kh-binary", "bench --all-devices --dry-run", 2, "known_hosts:1:", "not text", files={**inventory(INVENTORY), "home/known_hosts": RANDOM}),
    case("kh-unknown-type-ok", "bench --all-devices --dry-run --json", 0, '"pi01"', files={**inventory(INVENTORY), "home/known_hosts": "h sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t\n@cert-authority *.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"}),
    # --- identity files -----------------------------------------------------------------------------
    case("id-random-bytes", "exec --all-devices -- true", 2, "identity file", "/key is not a private key (binary data", files=with_key(RANDOM)),
    case("id-public-key", "exec --all-devices -- true", 2, "/key is a public key", files=with_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPx me@box\n")),
    case("id-text", "deploy --all-devices --dry-run", 2, "no '-----BEGIN ... PRIVATE KEY-----' line", files=with_key("hello\n")),
    case("id-empty", "exec --all-devices -- true", 2, "/key is not a private key", files=with_key("")),
    case("id-missing", "bench --all-devices --dry-run", 2, "/nokey does not exist", files=inventory("all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1, identity_file: nokey}\n")),
    case("id-directory", "exec --all-devices -- true", 2, "is a directory, not a key file", files={**inventory("all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1, identity_file: keys}\n"), "keys/x": "x"}),
    case("id-good-shape", "bench --all-devices --dry-run --json", 0, '"pi01"', files=with_key(PRIVATE_KEY)),
    # --- variants ($ORCH_HOME/variants.yaml) ----------------------------------------------------------
    case("var-unknown-placeholder", "build --target lab --variant x --dry-run", 2, "variants.yaml:1: variant 'x'", "'-mcpu={cpu}'", "unknown placeholder {cpu}", files={"home/variants.yaml": 'x: {cflags: ["-mcpu={cpu}"]}\n'}),
    case("var-stray-open-brace", "build --target lab --variant x --dry-run", 2, "'-O3 {'", "Single '{'", files={"home/variants.yaml": 'x: {cflags: ["-O3 {"]}\n'}),
    case("var-stray-close-brace", "build --target lab --variant x", 2, "'-O3 }'", "Single '}'", files={"home/variants.yaml": 'x: {cflags: ["-O3 }"]}\n'}),
    case("var-positional-placeholder", "build --target lab --variant x --dry-run", 2, "unknown placeholder {}", files={"home/variants.yaml": 'x: {cflags: ["-march={}"]}\n'}),
    case("var-not-utf8", "build --target lab --variant x --dry-run", 2, "variants.yaml:2:", "0xff", files={"home/variants.yaml": b"x:\n  description: \xff\n"}),
    case("var-bad-yaml", "build --target lab --variant tuned --dry-run", 2, "variants.yaml:2:", "not valid YAML", files={"home/variants.yaml": "x: [1\ny: 2\n"}),
    case("var-unknown-key", "build --target lab --variant x --dry-run", 2, "unknown key 'cflag'", "did you mean 'cflags'?", files={"home/variants.yaml": "x: {cflag: [-O3]}\n"}),
    case("var-cflag-not-string", "build --target lab --variant x --dry-run", 2, "cflags entries are compiler flags", files={"home/variants.yaml": "x: {cflags: [[-O3]]}\n"}),
    case("var-negative-inline", "build --target lab --variant x --dry-run", 2, "'inline_limit' must be >= 0", files={"home/variants.yaml": "x: {inline_limit: -1}\n"}),
    case("var-nested-define", "build --target lab --variant x --dry-run", 2, "defines must map CMake names to values", files={"home/variants.yaml": "x: {defines: {A: [1]}}\n"}),
    case("var-not-mapping", "build --target lab --variant x --dry-run", 2, "maps variant names to their settings", files={"home/variants.yaml": "- x\n"}),
    case("var-unknown-name", "build --target lab --variant tunde --dry-run", 2, "unknown variant 'tunde'", "Did you mean 'tuned'?"),
    # --- build options, --dry-run and real (the real run never reaches an engine here) ----------------
    *[
        case(f"build-docker-host-{label}{'-dry' if dry else ''}", ("build", "--target", "lab", "--docker-host", value, *(["--dry-run"] if dry else [])), 2, *words)
        for label, value, words in [
            ("empty", "", ("--docker-host '' is empty",)),
            ("ssh-no-host", "ssh://", ("'ssh://' names no host",)),
            ("not-a-url", "not a url", ("'not a url' is not an engine address",)),
            ("port-range", "ssh://h:99999", ("ssh://h:99999", "out of range")),
            ("missing-socket", "unix:///missing.sock", ("no socket at /missing.sock",)),
            ("path", "tcp://h:2375/x", ("has no path",)),
        ]
        for dry in (True, False)
    ],
    case("build-docker-host-regular-file", ("build", "--target", "lab", "--dry-run", "--docker-host", "unix://{root}/inventory.yaml"), 2, "is not a socket", files=inventory(INVENTORY)),
    case("build-ort-version-shell", ("build", "--target", "lab", "--dry-run", "--ort-version", "banana; touch x"), 2, "'banana; touch x' is not an ONNX Runtime version"),
    case("build-ort-version-real", ("build", "--target", "lab", "--ort-version", "v1.21.0"), 2, "'v1.21.0' is not an ONNX Runtime version"),
    case("build-ort-version-debian", ("build", "--target", "lab", "--ort-source", "debian", "--ort-version", "1.20.0"), 2, "Debian trixie carries ORT 1.21.0, not 1.20.0"),
    case("build-ort-version-stock", ("build", "--target", "lab", "--variant", "stock", "--ort-version", "../../x"), 2, "'../../x' is not an ONNX Runtime version"),
    case("build-ort-version-stock-dry", ("build", "--target", "lab", "--variant", "stock", "--dry-run", "--ort-version", "1.x"), 2, "'1.x' is not an ONNX Runtime version"),
    case("build-define-wrong-case-dry", "build --target lab --variant tuned --dry-run -D ONNXRUNTIME_ENABLE_LTO=ON", 2, "ONNXRUNTIME_ENABLE_LTO", "did you mean 'onnxruntime_ENABLE_LTO'?"),
    case("build-define-wrong-case-real", "build --target lab --variant tuned -D ONNXRUNTIME_ENABLE_LTO=ON", 2, "did you mean 'onnxruntime_ENABLE_LTO'?"),
    case("build-define-onnx-ml-dry", "build --target lab --dry-run -D ONNX_ML=OFF", 2, "ONNX_ML", "--disable_ml_ops"),
    case("build-define-onnx-ml-real", "build --target lab -D ONNX_ML=OFF", 2, "ONNX_ML", "--disable_ml_ops"),
    case("build-define-no-value", "build --target lab --dry-run -D onnxruntime_USE_XNNPACK", 2, "is not NAME=VALUE"),
    case("build-define-bad-name", "build --target lab --dry-run -D 9lives=ON", 2, "'9lives'", "not a CMake variable name"),
    case("build-define-forced", "build --target lab --dry-run --json --force-flags -D ONNX_ML=OFF", 0, "--force-flags: CMake define 'ONNX_ML'"),
    case("build-target-unknown", "build --target rpi9 --dry-run", 2, "rpi9"),
    case("build-ep-unknown", "build --target lab --ep cuda --dry-run", 2, "target 'lab' has no NVIDIA GPU"),
    case("build-scope-unknown", "build --target lab --scope all --dry-run", 2, "invalid choice: 'all'"),
    case("build-parallel-zero", "build --target lab --parallel 0 --dry-run", 2, "argument --parallel: must be a whole number >= 1, not '0'"),
    case("build-parallel-text", "build --target lab --parallel many", 2, "argument --parallel: must be a whole number, not 'many'"),
    case("build-no-target", "build --dry-run", 2, "orch build needs --target"),
    case("build-ort-source-missing", "build --target lab --dry-run --ort-source /nowhere/ort", 2, "--ort-source '/nowhere/ort' is neither"),
    case("build-stock-with-define", "build --target lab --variant stock -D A=1", 2, "the stock variant is not built"),
    case("build-stock-with-docker-host", ("build", "--target", "lab", "--variant", "stock", "--docker-host", "ssh://h"), 2, "the stock variant is not built"),
    # --- bench options (plan-level: --dry-run and the real run refuse alike) -----------------------
    *[
        case(f"bench-{label}{'-dry' if dry else ''}", ("bench", "--all-devices", *argv, *(["--dry-run"] if dry else [])), 2, *words, files={**inventory(INVENTORY), "random.onnx": RANDOM, "empty.onnx": b""})
        for label, argv, words in [
            ("model-missing", ("--model", "{root}/models/nope.onnx"), ("--model", "nope.onnx': no such file")),
            ("model-random-bytes", ("--model", "{root}/random.onnx"), ("random.onnx': not an ONNX model",)),
            ("model-empty-file", ("--model", "{root}/empty.onnx"), ("empty.onnx': not an ONNX model",)),
            ("shape-nonsense", ("--shape", "nonsense"), ("--shape 'nonsense': expected NAME=DxD",)),
            ("shape-zero-dim", ("--shape", "input=1x0x3"), ("--shape 'input=1x0x3'",)),
            ("shape-no-name", ("--shape", "=1x3"), ("--shape '=1x3'",)),
            ("max-runs-zero", ("--max-runs", "0"), ("argument --max-runs: must be a whole number >= 1, not '0'",)),
            ("max-runs-below-min", ("--max-runs", "10"), ("--max-runs 10 is below --min-runs 30",)),
            ("rounds-zero", ("--rounds", "0"), ("argument --rounds: must be a whole number >= 1",)),
            ("cooldown-negative", ("--cooldown", "-1"), ("argument --cooldown: must be a number >= 0, not '-1'",)),
            ("warmup-negative", ("--warmup", "-2"), ("argument --warmup: must be a whole number >= 0",)),
            ("min-runs-zero", ("--min-runs", "0"), ("argument --min-runs",)),
            ("min-duration-nan", ("--min-duration", "nan"), ("argument --min-duration: must be a finite number, not 'nan'",)),
            ("step-timeout-zero", ("--step-timeout", "0"), ("argument --step-timeout: must be a number > 0",)),
            ("parallel-zero", ("--parallel", "0"), ("argument --parallel",)),
            ("threshold-inf", ("--threshold", "inf"), ("argument --threshold: must be a finite number",)),
            ("inter-threads-negative", ("--inter-threads", "-1"), ("argument --inter-threads",)),
            ("threads-text", ("--threads", "1,x"), ("--threads 'x': expected whole numbers",)),
            ("threads-negative", ("--threads", "-1"), ("--threads -1: must be >= 0",)),
            ("opt-level-unknown", ("--opt-level", "max"), ("--opt-level 'max': choose from",)),
            ("quantize-unknown", ("--quantize", "int4"), ("invalid choice: 'int4'",)),
            ("variant-twice", ("--variant", "stock,stock"), ("--variant lists a variant twice",)),
            ("same-setting-twice", ("--threads", "1,1"), ("the same setting is listed twice",)),
        ]
        for dry in (True, False)
    ],
    # --- --model files are ONNX models, checked on the workstation before anything is planned or sent ------
    *[
        case(f"model-{command}-{label}{'-dry' if dry else ''}", (command, "--all-devices", "--model", f"{{root}}/{name}", *(["--dry-run"] if dry else [])), 2, "argument --model", *words, files={**inventory(INVENTORY), "random.onnx": RANDOM, "empty.onnx": b"", "zero.onnx": Path("/dev/zero"), "dir.onnx/x": "x", "text.onnx": "ir_version: 8\n"})
        for command in ("deploy", "bench")
        for label, name, words in [
            ("random-bytes", "random.onnx", ("random.onnx': not an ONNX model",)),
            ("empty-file", "empty.onnx", ("empty.onnx': not an ONNX model (an empty file)",)),
            ("text-file", "text.onnx", ("text.onnx': not an ONNX model",)),
            ("directory", "dir.onnx", ("dir.onnx': is a directory, not an ONNX model file",)),
            ("dev-zero", "zero.onnx", ("zero.onnx': is a device or socket, not an ONNX model file",)),
        ]
        for dry in (True, False)
    ],
    case("model-build-dev-zero", ("build", "--target", "lab", "--variant", "reduced", "--dry-run", "--model", "{root}/zero.onnx"), 2, "argument --model", "zero.onnx': is a device or socket, not an ONNX model file", files={"zero.onnx": Path("/dev/zero")}),
    case("model-build-random-bytes", ("build", "--target", "lab", "--variant", "reduced", "--model", "{root}/random.onnx"), 2, "argument --model", "random.onnx': not an ONNX model", files={"random.onnx": RANDOM}),
    case("model-deploy-missing", ("deploy", "--all-devices", "--dry-run", "--model", "{root}/nope.onnx"), 2, "argument --model", "nope.onnx': no such file", files=inventory(INVENTORY)),
    case("model-tune-directory", ("tune", "--all-devices", "--dry-run", "--model", "{root}/dir.onnx"), 2, "argument --model", "is a directory, not an ONNX model file", files={**inventory(INVENTORY), "dir.onnx/x": "x"}),
    case("model-bench-second-of-two", ("bench", "--all-devices", "--dry-run", "--model", "mobilenet,{root}/random.onnx"), 2, "argument --model", "random.onnx': not an ONNX model", files={**inventory(INVENTORY), "random.onnx": RANDOM}),
    # --- exec / deploy / lab / demo options -----------------------------------------------------------
    case("exec-timeout-zero", "exec --all-devices --timeout 0 -- true", 2, "argument --timeout: must be a number > 0, not '0'", files=inventory(INVENTORY)),
    case("exec-timeout-negative", "exec --all-devices --timeout -5 -- true", 2, "argument --timeout: must be a number > 0, not '-5'", files=inventory(INVENTORY)),
    case("exec-timeout-nan", "exec --all-devices --timeout nan -- true", 2, "must be a finite number, not 'nan'", files=inventory(INVENTORY)),
    case("exec-parallel-zero", "exec --all-devices --parallel 0 -- true", 2, "argument --parallel", files=inventory(INVENTORY)),
    case("exec-no-command", "exec --all-devices", 2, "", files=inventory(INVENTORY)),
    case("deploy-timeout-zero", "deploy --all-devices --dry-run --timeout 0", 2, "--timeout must be positive", files=inventory(INVENTORY)),
    case("deploy-timeout-nan", "deploy --all-devices --dry-run --timeout nan", 2, "--timeout must be positive", files=inventory(INVENTORY)),
    case("deploy-keep-zero", "deploy --all-devices --dry-run --keep 0", 2, "--keep must be at least 1", files=inventory(INVENTORY)),
    case("deploy-parallel-text", "deploy --all-devices --parallel x", 2, "argument --parallel: invalid int value: 'x'", files=inventory(INVENTORY)),
    case("deploy-artifact-missing", ("deploy", "--all-devices", "--dry-run", "--artifact", "{root}/nope"), 6, "/nope: no manifest.json", files=inventory(INVENTORY)),
    case("deploy-timeout-inf", "deploy --all-devices --dry-run --timeout 1e400", 2, "--timeout must be positive", files=inventory(INVENTORY)),
    case("path-nul-inventory", ("inventory", "list", "-i", "a\0b"), 2, "argument -i/--inventory: a path cannot hold a NUL byte"),
    case("path-nul-output", ("results", "export", "--csv", "-o", "x\0.csv"), 2, "a path cannot hold a NUL byte", results=nothing),
    case("path-empty-html", ("report", "latest", "--html", ""), 2, "argument --html: must be a path, not ''", results=nothing),
    case("path-too-long-ort-source", ("build", "--target", "lab", "--dry-run", "--ort-source", "x" * 3000), 2, "not a usable path", "File name too long"),
    case("path-too-long-artifact", ("deploy", "--all-devices", "--dry-run", "--artifact", "y" * 3000), 2, "a path component is longer than 255 bytes", files=inventory(INVENTORY)),
    case("nul-in-a-name", ("bench", "--all-devices", "--dry-run", "--variant", "a\0b"), 2, "--variant: the value 'a\\x00b' holds a NUL byte", files=inventory(INVENTORY)),
    case("nul-in-the-command", ("exec", "--all-devices", "--", "echo \0"), 2, "the command: the value", "holds a NUL byte", files=inventory(INVENTORY)),
    case("bench-ep-unknown", "bench --all-devices --dry-run --ep cpux", 2, "--ep 'cpux': not an execution provider (did you mean 'cpu'?)", files=inventory(INVENTORY)),
    case("bench-ep-full-name-ok", "bench --all-devices --dry-run --json --ep ACLExecutionProvider", 0, '"ACLExecutionProvider"', files=inventory(INVENTORY)),
    case("bench-sysfs-relative", "bench --all-devices --dry-run --sysfs-root sys", 2, "--sysfs-root 'sys': must be an absolute path on the board", files=inventory(INVENTORY)),
    case("tune-budget-unit", "tune --all-devices --model m --budget 20x", 2, "argument --budget: must be a duration such as 90s, 20m or 1h30m, not '20x'", files=inventory(INVENTORY)),
    case("tune-budget-zero", "tune --all-devices --model m --budget 0m --dry-run", 2, "argument --budget: must be longer than 0 s", files=inventory(INVENTORY)),
    case("tune-budget-too-small", "tune --all-devices --model m --budget 10s --dry-run", 2, "--budget 10 s: the first rung alone runs each of the 9 candidates 2 times", files=inventory(INVENTORY)),
    case("tune-no-model", "tune --all-devices --dry-run", 2, "the following arguments are required: --model", files=inventory(INVENTORY)),
    case("tune-two-models", "tune --all-devices --model a,b", 2, "--model 'a,b': orch tune tunes one model at a time", files=inventory(INVENTORY)),
    case("tune-opt-level-unknown", "tune --all-devices --model m --opt-level max", 2, "--opt-level 'max': choose from", files=inventory(INVENTORY)),
    case("lab-up-timeout-zero", "lab up --timeout 0", 2, "argument --timeout: must be a number > 0"),
    case("lab-up-boards-zero", "lab up --boards 0", 2, "--boards must be between 1 and 64"),
    case("demo-boards-zero", "demo --boards 0 --dry-run", 2, "argument --boards: must be a whole number >= 1"),
    # --- results store: damaged files are named and skipped (exit 8), the rest is shown --------------
    case("res-index-garbage", "results list", 0, "index.sqlite: not a usable SQLite database", "kept as index.sqlite.damaged", results=index(RANDOM)),
    case("res-index-truncated", "results list --json", 0, "kept as index.sqlite.damaged", RUNS[1], results=index()),
    case("res-index-foreign-schema", "results list", 0, "table 'runs' has other columns", results=index(schema="CREATE TABLE runs (id INTEGER, name TEXT);")),
    case("res-index-empty-file", "results show latest", 0, RUNS[1], results=index(b"")),
    case("res-board-truncated-list", "results list", 8, "pi01.json: truncated JSON", "skipped (the file is left as it is)", results=lambda root: (index(RANDOM)(root), truncate("pi01.json")(root))),
    case("res-board-truncated-show", "results show latest", 8, "pi01.json: truncated JSON", "1 damaged file(s)", results=truncate("pi01.json")),
    case("res-board-foreign", "results show latest --json", 8, "pi01.json: not an orch board record (schema 'someone-else/3'", results=replace("pi01.json", FOREIGN_BOARD)),
    case("res-board-list-json", "results export --csv", 8, "pi02.json: not a board record (a JSON list", results=replace("pi02.json", b"[1, 2, 3]")),
    case("res-board-not-utf8", "results compare latest~1 latest", 8, "pi01.json: not UTF-8 text", results=replace("pi01.json", b"\xff\xfe{}")),
    case("res-board-bad-measurement", "report latest --html {root}/out/r.html", 8, "pi01.json: a measurement is malformed", results=replace("pi01.json", BAD_MEASUREMENT)),
    case("res-run-json-damaged", "results show latest", 8, "run.json: not valid JSON", results=replace("run.json", b"{]")),
    case("res-board-empty", "results export --json", 8, "pi01.json: empty file", results=replace("pi01.json", b"")),
    case("res-unknown-run", "results show 2099", 2, "no run '2099'", results=nothing),
    case("res-export-missing-dir", "results export --csv -o /missing/dir/x.csv", 2, "-o /missing/dir/x.csv: cannot write the file", "No such file or directory", results=nothing),
    case("res-export-to-directory", ("results", "export", "--csv", "-o", "{root}"), 2, "cannot write the file", "Is a directory", results=nothing),
    case("res-export-parent-is-file", ("results", "export", "--csv", "-o", "{root}/inventory.yaml/x.csv"), 2, "cannot write the file", "Not a directory", files=inventory(INVENTORY), results=nothing),
    case("res-report-parent-is-file", ("report", "latest", "--html", "{root}/inventory.yaml/r.html"), 2, "--html", "cannot write the report", "Not a directory", files=inventory(INVENTORY), results=nothing),
    case("res-report-missing-run", "report 2099 --html x.html", 2, "no run '2099'", results=nothing),
    case("res-threshold-negative", "results show latest --threshold -1", 2, "argument --threshold: must be a number >= 0", results=nothing),
    case("res-report-threshold-nan", "report latest --threshold nan", 2, "must be a finite number", results=nothing),
]  # fmt: skip


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "w"
    (root / "home").mkdir(parents=True)
    (root / "inventory.yaml").write_text(INVENTORY)
    for key, value in {
        "ORCH_HOME": root / "home",
        "ORCH_INVENTORY": root / "inventory.yaml",
        "ORCH_RESULTS": root / "results",
        "ORCH_ARTIFACTS": root / "artifacts",
        "ORCH_SSH_CONFIG": root / "ssh_config",
        # Nothing may reach an engine: a check that let a real build through fails here at once.
        "DOCKER_HOST": "unix:///nonexistent/orch-test-engine.sock",
    }.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.chdir(root)
    yield root


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:  # argparse's own refusals
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def test_the_corpus_is_big_enough() -> None:
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    malformed = len(list((Path(__file__).parent.parent / "inventory" / "malformed").glob("*.yaml")))
    assert len(CASES) + malformed >= 200


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_case(case: Case, world: Path) -> None:
    for name, content in case.files.items():
        path = world / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            path.symlink_to(content)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    if case.results is not None:
        make_store(world / "results")
        case.results(world / "results")
    before = _snapshot(world / "results")
    argv = [part.replace("{root}", str(world)) for part in case.argv]
    code, stdout, stderr = run_cli(argv)
    output = stdout + stderr
    assert "Traceback" not in output, output
    assert "internal error" not in output, output
    assert code == case.code, f"exit {code}, expected {case.code}\n{output}"
    flat = " ".join(output.split())
    for word in case.words:
        assert " ".join(word.replace("{root}", str(world)).split()) in flat, f"{word!r} not in:\n{output}"
    if case.code == 2 and case.results is None:
        assert stdout == "", "a refused command prints no result"
    # Damaged files are never rewritten or removed (a damaged index is moved aside, never deleted).
    after = _snapshot(world / "results")
    for path, content in before.items():
        if path.name == "index.sqlite" and path not in after:
            assert any(p.name.startswith("index.sqlite.damaged") and c == content for p, c in after.items())
        elif path.suffix == ".json":
            assert after.get(path) == content, f"{path} changed"


def _snapshot(root: Path) -> dict[Path, bytes]:
    if not root.is_dir():
        return {}
    return {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}


def test_a_rebuilt_index_keeps_naming_the_skipped_files(world: Path) -> None:
    make_store(world / "results")
    index(RANDOM)(world / "results")
    truncate("pi01.json")(world / "results")
    first = run_cli(["results", "list"])
    second = run_cli(["results", "list", "--json"])
    assert first[0] == second[0] == 8
    assert "pi01.json: truncated JSON" in " ".join(second[2].split())
    assert os.path.exists(world / "results" / "index.sqlite.damaged")
