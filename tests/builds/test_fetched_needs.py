"""The fetch route's step after the fetch: a git source's cmake/deps.txt is read only once it is
cloned, so what the build container downloads, and on which network, is a value of its own
(``execute.fetched_needs``) beside the plan, which stays what ``--dry-run`` showed (no Docker)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.builds.execute import fetched_needs
from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.sources.ort import SourceTree
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.variants import resolve_variant
from orchestrator.targets import resolve_target

MIRROR = "http://127.0.0.1:8123"


def _plan(source: str, dependencies: str = "fetch") -> BuildPlan:
    spec = parse_source(source, version=None, suite=None)
    options = BuildOptions(source=spec, scope="mlas-test", dependencies=dependencies)  # type: ignore[arg-type]
    return make_plan(resolve_target("lab"), resolve_variant("tuned"), options)


def _cloned(plan: BuildPlan, root: Path, urls: list[str]) -> SourceTree:
    """A fetched tree as the clone leaves it: its release and its cmake/deps.txt."""
    (root / "cmake").mkdir(parents=True)
    (root / "VERSION_NUMBER").write_text("1.21.0\n")
    deps = ["# name;url;sha1", *(f"dep{i};{url};{'0' * 40}" for i, url in enumerate(urls))]
    (root / "cmake" / "deps.txt").write_text("\n".join(deps) + "\n")
    return SourceTree(path=root, version="1.21.0", spec=plan.source, source_sha256="git:0", patches=())


def test_a_clones_loopback_downloads_are_listed_after_the_fetch_and_take_the_hosts_network(
    tmp_path: Path,
) -> None:
    plan = _plan(f"{MIRROR}/onnxruntime.git@v1.21.0")
    assert plan.network_needs.pending is not None and plan.network is None  # unknown before the clone
    archives = [f"{MIRROR}/abseil.zip", f"{MIRROR}/protobuf.zip"]
    fetched = fetched_needs(plan, _cloned(plan, tmp_path, archives))
    assert fetched.listed_after_fetch and fetched.needs.pending is None
    assert [d.url for d in fetched.needs.downloads] == [f"{MIRROR}/onnxruntime.git", *archives]
    assert fetched.network == "host"
    assert fetched.lines() == [
        "needs the network: yes (cmake/deps.txt of the fetched source, 2 archives)",
        f"    ORT source: git clone @ v1.21.0: {MIRROR}/onnxruntime.git",
        f"    ORT FetchContent (cmake/deps.txt): {archives[0]}",
        f"    ORT FetchContent (cmake/deps.txt): {archives[1]}",
        "every download is a loopback address: the build container runs on the host's network",
    ]
    # The plan is left as it was planned: the step's value is the fetched one.
    assert plan.network_needs.pending is not None and plan.network is None


def test_one_download_off_the_machine_keeps_the_engines_default_network(tmp_path: Path) -> None:
    plan = _plan(f"{MIRROR}/onnxruntime.git@v1.21.0")
    fetched = fetched_needs(
        plan, _cloned(plan, tmp_path, [f"{MIRROR}/a.zip", "https://example.invalid/b.zip"])
    )
    assert fetched.listed_after_fetch and fetched.network is None
    assert fetched.lines()[0] == "needs the network: yes (cmake/deps.txt of the fetched source, 2 archives)"
    assert not any("host's network" in line for line in fetched.lines())


def test_a_plan_that_listed_its_downloads_keeps_them(tmp_path: Path) -> None:
    # The offline route: nothing to read after the fetch, the container stays without a network.
    plan = _plan(f"{MIRROR}/onnxruntime.git@v1.21.0", dependencies="auto")
    assert plan.dependencies == "system" and plan.network == "none"
    fetched = fetched_needs(plan, _cloned(plan, tmp_path, [f"{MIRROR}/a.zip"]))
    assert not fetched.listed_after_fetch and fetched.lines() == []
    assert fetched.needs == plan.network_needs and fetched.network == "none"
