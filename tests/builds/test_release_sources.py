"""The release comes from the source itself (its VERSION_NUMBER), and the plan says when the build
needs the network and which URLs: through the real CLI's dry run, and the real source preparation
for a git clone whose release differs from the plan's (no container, no compile)."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from orchestrator.builds.sources.ort import prepare_source
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.errors import BuildError

DEPS = (
    "#Name;Url;SHA1\n"
    "# a comment line\n"
    "abseil_cpp;https://example.invalid/abseil-cpp/20240722.0.zip;36ee53eb1466fb6e593fc5c286680de31f8a494a\n"
    "protobuf;https://example.invalid/protobuf/v21.12.zip;7cf2733949036c7d52fda017badcab093fe73bfa\n"
)


def make_tarball(path: Path, version: str | None, *, deps: str | None = DEPS) -> Path:
    """A source tarball as upstream's (one top directory), with the files orch reads before a build."""
    files = {"tools/ci_build/build.py": "# build.py\n", "README.md": "onnxruntime\n"}
    if version is not None:
        files["VERSION_NUMBER"] = version + "\n"
    if deps is not None:
        files["cmake/deps.txt"] = deps
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"onnxruntime-{version or 'x'}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def make_tree(path: Path, version: str) -> Path:
    (path / "tools" / "ci_build").mkdir(parents=True)
    (path / "tools" / "ci_build" / "build.py").write_text("# build.py\n")
    (path / "VERSION_NUMBER").write_text(version + "\n")
    return path


def dry_run_json(orch_cli, env: dict[str, str], *args: str) -> dict:
    result = orch_cli(env, "build", *args, "--dry-run", "--json", check=True)
    return json.loads(result.stdout)


def test_a_tarball_gives_its_own_release_and_a_disagreeing_option_is_refused(
    tmp_path: Path, orch_env: dict[str, str], orch_cli
) -> None:
    tarball = make_tarball(tmp_path / "onnxruntime-1.21.0.tar.gz", "1.21.0")
    # Before: planned as 1.23.2, the option's release, whatever the tarball held.
    refused = orch_cli(
        orch_env,
        "build",
        "--target",
        "lab",
        "--ort-source",
        str(tarball),
        "--ort-version",
        "1.23.2",
        "--dry-run",
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "holds ORT 1.21.0 (its VERSION_NUMBER), but --ort-version says 1.23.2" in refused.stderr
    plan = dry_run_json(orch_cli, orch_env, "--target", "lab", "--ort-source", str(tarball))
    assert plan["ort_version"] == "1.21.0" and plan["source"]["kind"] == "tarball"


def test_a_checkout_that_disagrees_with_the_option_names_both(
    tmp_path: Path, orch_env: dict[str, str], orch_cli
) -> None:
    tree = make_tree(tmp_path / "ort", "1.21.0")
    refused = orch_cli(
        orch_env,
        "build",
        "--target",
        "lab",
        "--ort-source",
        str(tree),
        "--ort-version",
        "1.23.2",
        "--dry-run",
    )
    assert refused.returncode == 2
    assert "holds ORT 1.21.0 (its VERSION_NUMBER), but --ort-version says 1.23.2" in refused.stderr


@pytest.mark.parametrize("content", ["no VERSION_NUMBER", "not a tarball"])
def test_a_tarball_whose_release_cannot_be_read_says_so(
    content: str, tmp_path: Path, orch_env: dict[str, str], orch_cli
) -> None:
    tarball = tmp_path / "ort.tar.gz"
    if content == "no VERSION_NUMBER":
        make_tarball(tarball, None)
        expected = "no VERSION_NUMBER at the top of the archive: its ONNX Runtime release cannot be read"
    else:
        tarball.write_bytes(b"these are not the bytes of a tar archive\n" * 20)
        expected = "cannot read the tarball to find its release"
    for args in ((), ("--ort-version", "1.21.0")):
        result = orch_cli(
            orch_env, "build", "--target", "lab", "--ort-source", str(tarball), *args, "--dry-run"
        )
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert expected in result.stderr


def test_a_git_url_takes_the_release_of_its_ref_and_says_it_is_checked_after_the_clone(
    orch_env: dict[str, str], orch_cli
) -> None:
    url = "https://example.invalid/onnxruntime.git"
    plan = dry_run_json(orch_cli, orch_env, "--target", "rpi4", "--ort-source", f"{url}@v1.22.0")
    # Before: planned as 1.21.0 (the default) with a 1.22.0 ref.
    assert plan["ort_version"] == "1.22.0" and plan["source"]["ref"] == "v1.22.0"
    assert any("VERSION_NUMBER is checked after cloning" in note for note in plan["notes"])
    refused = orch_cli(
        orch_env, "build", "--target", "rpi4", "--ort-source", f"{url}@v1.22.0", "--ort-version", "1.21.0",
        "--dry-run",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "the ref v1.22.0 names ORT 1.22.0, but --ort-version says 1.21.0" in refused.stderr
    branch = orch_cli(orch_env, "build", "--target", "rpi4", "--ort-source", f"{url}@main", "--dry-run")
    assert branch.returncode == 2 and "does not name a release" in branch.stderr


def test_the_clone_of_another_release_stops_the_real_run_after_fetching(
    tmp_path: Path, orch_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tag that holds another release than its name says: refused once the clone is there."""
    repo = make_tree(tmp_path / "repo", "1.20.0")
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "."],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree"],
        ["git", "tag", "v1.22.0"],
    ):
        subprocess.run(argv, cwd=repo, check=True, capture_output=True)
    monkeypatch.setenv("ORCH_HOME", orch_env["ORCH_HOME"])
    spec = parse_source(f"file://{repo}@v1.22.0", version=None, suite=None)
    assert spec.version == "1.22.0"
    with pytest.raises(
        BuildError, match=r"holds ORT 1\.20\.0, but the build was planned for 1\.22\.0 \(from git ref\)"
    ):
        prepare_source(spec, engine=None, base_image=None, log=lambda line: None)


def test_the_plan_lists_the_network_downloads_and_an_offline_plan_claims_none(
    tmp_path: Path, orch_env: dict[str, str], orch_cli
) -> None:
    offline = dry_run_json(orch_cli, orch_env, "--target", "lab")
    assert offline["network"] == "none"
    assert offline["needs_network"] == {"needed": False, "downloads": [], "pending": None}
    human = orch_cli(orch_env, "build", "--target", "lab", "--dry-run", check=True)
    assert "needs the network: no (nothing is downloaded)" in human.stderr

    # A release trixie does not carry: ORT's FetchContent route, its URLs read from the tarball.
    tarball = make_tarball(tmp_path / "onnxruntime-1.23.2.tar.gz", "1.23.2")
    fetch = dry_run_json(orch_cli, orch_env, "--target", "rpi4", "--ort-source", str(tarball))
    assert fetch["dependencies"] == "fetch" and fetch["network"] == "default"
    assert fetch["needs_network"]["needed"] is True
    assert [d["url"] for d in fetch["needs_network"]["downloads"]] == [
        "https://example.invalid/abseil-cpp/20240722.0.zip",
        "https://example.invalid/protobuf/v21.12.zip",
    ]
    shown = orch_cli(
        orch_env, "build", "--target", "rpi4", "--ort-source", str(tarball), "--dry-run", check=True
    )
    assert "needs the network: yes" in shown.stderr
    assert "https://example.invalid/protobuf/v21.12.zip" in shown.stderr

    # A git URL: the clone is a download; deps.txt is read only once the source is there.
    url = "https://example.invalid/onnxruntime.git"
    git = dry_run_json(orch_cli, orch_env, "--target", "rpi4", "--ort-source", f"{url}@v1.23.2")
    assert git["needs_network"]["downloads"] == [{"what": "ORT source: git clone @ v1.23.2", "url": url}]
    assert "read once the source is fetched" in git["needs_network"]["pending"]


@pytest.mark.integration  # Debian's real 1.21.0 orig tarball (fetched once with apt, cached)
def test_the_real_1_21_tarball_is_1_21_whatever_the_option_says(
    ort_tarball: Path, orch_env: dict[str, str], orch_cli
) -> None:
    refused = orch_cli(
        orch_env, "build", "--target", "lab", "--ort-source", str(ort_tarball), "--ort-version", "1.23.2",
        "--dry-run",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "holds ORT 1.21.0 (its VERSION_NUMBER), but --ort-version says 1.23.2" in refused.stderr
    plan = dry_run_json(orch_cli, orch_env, "--target", "lab", "--ort-source", str(ort_tarball))
    assert plan["ort_version"] == "1.21.0" and plan["dependencies"] == "system"
    assert plan["needs_network"]["needed"] is False  # trixie carries 1.21.0's dependencies
