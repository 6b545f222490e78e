"""The artifact store on the workstation: built (or fetched) wheels with their manifests, and
ORT's C library builds (``--scope library``) with theirs.

Layout: ``artifacts/<target>/<variant>/<ort-version>/`` holding one ``*.whl`` and
``manifest.json``. ``orch build`` writes it; ``orch deploy`` and ``orch build list`` read
it. On disk a manifest is one flat JSON object; it always has at least::

    {"target": "lab", "variant": "tuned", "ort_version": "1.21.0",
     "wheel": "onnxruntime-1.21.0-cp313-cp313-linux_aarch64.whl"}

and normally ``kind`` (``"wheel"``; a manifest of an older orch has none and is a wheel's),
``wheel_sha256``, ``wheel_size``, ``created``, ``wheel_check`` and ``preflight``
(``{"ok": true, ...}``), plus everything the build knows (flags, compiler, image id, timings...).

A C library build (``"kind": "library"``) has no wheel: its directory,
``artifacts/<target>/<variant>/<ort-version>-library/`` (beside the wheel's of the same release, never
in place of it), holds the build's ``out/`` as it was (``orch-runner``, ``lib/``, ``include/``),
listed with their sha256 under ``library`` and the runner under ``native_runner``.

In orch a manifest is a ``Manifest``: JSON is read and written only here (``Manifest.from_json``,
``Manifest.to_json``, ``read_manifest``, ``write_manifest``). A key the manifest did not record
is ``None`` in the dataclass and is not written back. Keys this version of orch does not know
(a newer orch wrote them) are kept, not dropped: in ``Manifest.extra`` at the top level, in the
``details`` of the pre-flight, the wheel check and the source, and written back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.common.json_fields import JsonFields, JsonSource
from orchestrator.errors import UsageError
from orchestrator.paths import artifacts_dir

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class ManifestError(UsageError):
    """A manifest.json that is not JSON, misses a required key or holds a key of the wrong type."""


# What an artifact holds: a wheel (with, normally, the native runner beside it), or ORT's C library
# with the runner and no Python at all (``orch build --scope library``).
ArtifactKind = Literal["wheel", "library"]
ARTIFACT_KINDS: tuple[ArtifactKind, ...] = ("wheel", "library")
LIBRARY_SUFFIX = "-library"  # of a C library build's directory: <ort-version>-library


_HINT = "rebuild the artifact (orch build) or fix the manifest"


def _fields(document: object, where: str) -> JsonFields:
    """Typed reads from a manifest's JSON; an error is a ManifestError naming the file and the key."""
    source = JsonSource(
        where=where,
        error=ManifestError,
        hint=_HINT,
        not_object_hint="rebuild the artifact (orch build) or remove its directory",
        whole="the manifest",
    )
    return JsonFields(document, source)


def _plain(value: object) -> object:
    """A field value as JSON: dataclasses by their to_json, tuples as lists."""
    if isinstance(value, (Preflight, WheelCheck, Source, BuiltFor, BuildRecord, NativeRunner, LibraryFiles)):
        return value.to_json()
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _recorded(obj: DataclassInstance, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """The dataclass's fields that hold a value (None = not recorded, not written), as JSON."""
    return {
        f.name: _plain(getattr(obj, f.name))
        for f in fields(obj)
        if f.name not in skip and getattr(obj, f.name) is not None
    }


@dataclass(frozen=True, kw_only=True)
class Preflight:
    """The pre-flight's verdict: the wheel installed and run once on an emulated board CPU."""

    ok: bool
    error: str | None = None  # why it failed
    skipped: str | None = None  # why it did not run ("disabled", "wheel check failed")
    # The rest of its report, as the pre-flight wrote it: qemu_cpu, image, exit_code, timings,
    # the board's ORT version and providers, the comparison with x86 onnxruntime (its shape is
    # builds.preflight.Comparison, a layer above; the C library's build log indexes into it).
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {**self.details, **_recorded(self, skip=("details",))}

    @property
    def gpu_verdict(self) -> str | None:
        """A CUDA wheel's own GPU verdict ("GPU path not run (...)", "GPU result matches x86"); None
        for a CPU wheel."""
        gpu = self.details.get("gpu")
        return str(gpu.get("verdict")) if isinstance(gpu, Mapping) else None

    @classmethod
    def read(cls, f: JsonFields) -> Preflight:
        return cls(
            ok=f.required_flag("ok"), error=f.text("error"), skipped=f.text("skipped"), details=f.rest()
        )


@dataclass(frozen=True, kw_only=True)
class WheelCheck:
    """The wheel check against the target: architecture, glibc, Python tag of every shared object."""

    ok: bool
    problems: tuple[str, ...] = ()
    # What inspect_wheel found (WheelInfo.as_dict()): tags, machines, glibc_required, shared objects.
    details: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {**self.details, **_recorded(self, skip=("details",))}

    @classmethod
    def read(cls, f: JsonFields) -> WheelCheck:
        return cls(ok=f.required_flag("ok"), problems=f.texts("problems") or (), details=f.rest())


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where the compiled ONNX Runtime sources (or the official wheel) came from."""

    kind: str  # a source kind of the build plan, or "index" for the official wheel
    description: str | None = None
    location: str | None = None
    ref: str | None = None
    sha256: str | None = None  # of the source tree the build compiled
    download_argv: tuple[str, ...] | None = None  # stock: how the official wheel was fetched
    details: Mapping[str, object] = field(default_factory=dict)  # keys this orch does not know

    def to_json(self) -> dict[str, object]:
        return {**self.details, **_recorded(self, skip=("details",))}

    @classmethod
    def read(cls, f: JsonFields) -> Source:
        return cls(
            kind=f.required_text("kind"),
            description=f.text("description"),
            location=f.text("location"),
            ref=f.text("ref"),
            sha256=f.text("sha256"),
            download_argv=f.texts("download_argv"),
            details=f.rest(),
        )


@dataclass(frozen=True, kw_only=True)
class BuiltFor:
    """The target profile the build compiled for, as it was at build time."""

    cpu: str | None = None
    mcpu: str | None = None
    glibc: str | None = None
    python: str | None = None
    distro: str | None = None

    def to_json(self) -> dict[str, object]:
        return _recorded(self)

    @classmethod
    def read(cls, f: JsonFields) -> BuiltFor:
        return cls(
            cpu=f.text("cpu"),
            mcpu=f.text("mcpu"),
            glibc=f.text("glibc"),
            python=f.text("python"),
            distro=f.text("distro"),
        )


@dataclass(frozen=True, kw_only=True)
class BuildRecord:
    """How the wheel was made, as far as it is known: everything is optional (the official wheel,
    or a manifest of an older orch, records less). On disk these are top-level manifest keys."""

    variant_description: str | None = None
    execution_provider: str | None = None
    source: Source | None = None
    patches: tuple[dict[str, str], ...] | None = None  # {"name", "sha256"} per applied patch, in order
    dependencies: str | None = None  # "system" | "source" | "fetch"
    toolchain: str | None = None  # "gcc-multiarch" | "clang-sysroot" (its version: ``compiler``)
    # The self-contained route: each dependency's Debian package, version, sha256 and ORT patch.
    dependency_sources: tuple[dict[str, str], ...] | None = None
    # --sysroot-from: the stored sysroot the wheel was built and checked for (name, digest, OS, check).
    sysroot: dict[str, object] | None = None
    image: str | None = None  # the build image's tag
    image_id: str | None = None
    engine: str | None = None  # the Docker engine that built it
    build_argv: tuple[str, ...] | None = None
    defines: tuple[str, ...] | None = None  # "KEY=VALUE" CMake defines
    compiler_flags: tuple[str, ...] | None = None
    linker_flags: tuple[str, ...] | None = None
    parallel: int | None = None
    target_profile: BuiltFor | None = None
    compiler: str | None = None  # "aarch64-linux-gnu-g++ 14.2.0"
    compile_commands_readback: Mapping[str, object] | None = None  # per key source: the flags it really got
    bundled_libraries: tuple[str, ...] | None = None
    ccache: dict[str, object] | None = None  # hits, misses, hit rate of the build
    # In the kept build directory: did CMake configure again ("ran"/"reused"), how many ninja steps.
    incremental: dict[str, object] | None = None
    build_duration_s: float | None = None
    flag_warnings: tuple[str, ...] | None = None
    kleidiai: str | None = None  # "on" | "off" | "not in this release"
    # A reduced build: the models it was made for, the operator count, ORT's config text.
    operator_config: dict[str, object] | None = None
    # A profile-guided build: the profile's key and digest, where it was trained (board, CPU, what
    # ran, runs), what its counters covered and how many compiled sources had counters.
    profile: dict[str, object] | None = None
    # A CUDA build: nvcc, the GPU architectures, the sysroot's CUDA/cuDNN/TensorRT, the board's GPU
    # libraries the provider links (name -> the sysroot's file), the GPU code cuobjdump found.
    cuda: dict[str, object] | None = None

    def to_json(self) -> dict[str, object]:
        return _recorded(self)

    @classmethod
    def read(cls, f: JsonFields) -> BuildRecord:
        source = f.child("source")
        target_profile = f.child("target_profile")
        return cls(
            variant_description=f.text("variant_description"),
            execution_provider=f.text("execution_provider"),
            source=Source.read(source) if source else None,
            patches=f.text_maps("patches"),
            dependencies=f.text("dependencies"),
            toolchain=f.text("toolchain"),
            dependency_sources=f.text_maps("dependency_sources"),
            sysroot=f.document_value("sysroot"),
            image=f.text("image"),
            image_id=f.text("image_id"),
            engine=f.text("engine"),
            build_argv=f.texts("build_argv"),
            defines=f.texts("defines"),
            compiler_flags=f.texts("compiler_flags"),
            linker_flags=f.texts("linker_flags"),
            parallel=f.integer("parallel"),
            target_profile=BuiltFor.read(target_profile) if target_profile else None,
            compiler=f.text("compiler"),
            compile_commands_readback=f.document_value("compile_commands_readback"),
            bundled_libraries=f.texts("bundled_libraries"),
            ccache=f.document_value("ccache"),
            incremental=f.document_value("incremental"),
            build_duration_s=f.number("build_duration_s"),
            flag_warnings=f.texts("flag_warnings"),
            kleidiai=f.text("kleidiai"),
            operator_config=f.document_value("operator_config"),
            profile=f.document_value("profile"),
            cuda=f.document_value("cuda"),
        )


@dataclass(frozen=True, kw_only=True)
class NativeRunner:
    """The native runner built for this artifact's release (orchestrator.builds.native_runner.plan), and
    the ORT C library in the wheel it links against: what a product without Python would ship."""

    file: str | None = None  # next to manifest.json; None when no runner was made
    sha256: str | None = None
    size: int | None = None
    ort_version: str | None = None  # the release it was compiled for (and refuses any other)
    library: str | None = None  # e.g. onnxruntime/capi/libonnxruntime.so.1.21.0 in the wheel
    library_size: int | None = None
    library_sha256: str | None = None
    compile_argv: tuple[str, ...] | None = None
    image: str | None = None
    skipped: str | None = None  # why there is no runner (no C library in the wheel, no header offline)
    details: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {**self.details, **_recorded(self, skip=("details",))}

    @classmethod
    def read(cls, f: JsonFields) -> NativeRunner:
        return cls(
            file=f.text("file"),
            sha256=f.text("sha256"),
            size=f.integer("size"),
            ort_version=f.text("ort_version"),
            library=f.text("library"),
            library_size=f.integer("library_size"),
            library_sha256=f.text("library_sha256"),
            compile_argv=f.texts("compile_argv"),
            image=f.text("image"),
            skipped=f.text("skipped"),
            details=f.rest(),
        )


@dataclass(frozen=True, kw_only=True)
class LibraryFiles:
    """A C library build's files beside its manifest (kind ``library``), as the build's ``out/`` left
    them: what a deploy sends, each checked against its sha256 first."""

    # Path relative to the artifact directory -> sha256, for every regular file: the runner,
    # lib/libonnxruntime.so.<version> and the libraries it needs, include/onnxruntime_c_api.h.
    files: Mapping[str, str]
    soname: str | None = None  # lib/libonnxruntime.so.1: a link the board makes (a link is no content)
    header: str | None = None  # include/onnxruntime_c_api.h
    # What the build found and proved: each library's checked symbol versions, the sysroot.
    details: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {**self.details, **_recorded(self, skip=("details",))}

    @classmethod
    def read(cls, f: JsonFields) -> LibraryFiles:
        files = f.text_map("files")
        if not files:
            raise f.problem(
                f"key '{f.prefix}files' must list the build's files",
                hint="rebuild the artifact (orch build --scope library)",
            )
        return cls(files=files, soname=f.text("soname"), header=f.text("header"), details=f.rest())

    @property
    def libraries(self) -> tuple[str, ...]:
        """The files under lib/: ORT's C library and the libraries it needs."""
        return tuple(sorted(name for name in self.files if name.startswith("lib/")))


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """What an artifact is: which wheel (or C library), for which target and variant, and how it was
    checked and made."""

    target: str
    variant: str
    ort_version: str
    wheel: str | None = None  # file name, next to manifest.json; None only for a C library build
    # "wheel" or "library"; None: a manifest of an orch before C library artifacts, a wheel's.
    kind: ArtifactKind | None = None
    library: LibraryFiles | None = None  # kind "library": its files
    wheel_sha256: str | None = None
    wheel_size: int | None = None
    created: str | None = None  # ISO 8601, UTC
    wheel_check: WheelCheck | None = None
    preflight: Preflight | None = None
    build_info: str | None = None  # onnxruntime.get_build_info() of the wheel, when recorded
    native_runner: NativeRunner | None = None
    build: BuildRecord = field(default_factory=BuildRecord)
    extra: Mapping[str, object] = field(default_factory=dict)  # top-level keys this orch does not know

    @property
    def preflight_ok(self) -> bool:
        """Deploy offers only artifacts whose pre-flight passed."""
        return self.preflight is not None and self.preflight.ok

    @property
    def artifact_kind(self) -> ArtifactKind:
        """What the artifact holds; a manifest that does not say is a wheel's (older orch)."""
        return self.kind or "wheel"

    def to_json(self) -> dict[str, object]:
        return {**self.extra, **_recorded(self, skip=("build", "extra")), **self.build.to_json()}

    @classmethod
    def from_json(cls, document: object, *, source: str | Path) -> Manifest:
        """A manifest from its JSON document; ``source`` (its file) is named in every error."""
        f = _fields(document, str(source))
        wheel_check = f.child("wheel_check")
        preflight = f.child("preflight")
        runner = f.child("native_runner")
        kind = f.choice("kind", ARTIFACT_KINDS)
        library = f.child("library") if kind == "library" else None
        if kind == "library" and library is None:
            raise ManifestError(
                f"{source}: missing key 'library' (a C library build lists its files there)",
                hint="rebuild the artifact (orch build --scope library) or fix the manifest",
            )
        manifest = cls(
            target=f.required_text("target"),
            variant=f.required_text("variant"),
            ort_version=f.required_text("ort_version"),
            # A C library build has no wheel; every other artifact is one.
            wheel=f.text("wheel") if kind == "library" else f.required_text("wheel"),
            kind=kind,
            library=LibraryFiles.read(library) if library else None,
            wheel_sha256=f.text("wheel_sha256"),
            wheel_size=f.integer("wheel_size"),
            created=f.text("created"),
            wheel_check=WheelCheck.read(wheel_check) if wheel_check else None,
            preflight=Preflight.read(preflight) if preflight else None,
            build_info=f.text("build_info"),
            native_runner=NativeRunner.read(runner) if runner else None,
            build=BuildRecord.read(f),
        )
        return replace(manifest, extra=f.rest())  # what no read above asked for


@dataclass(frozen=True, kw_only=True)
class Artifact:
    directory: Path
    manifest: Manifest

    @property
    def kind(self) -> ArtifactKind:
        return self.manifest.artifact_kind

    @property
    def wheel_path(self) -> Path:
        wheel = self.manifest.wheel
        if wheel is None:
            raise UsageError(
                f"{self.directory} is a C library build (--scope library): it has no wheel",
                hint="its build proved it against the board's sysroot already; orch deploy --scope library"
                " deploys it",
            )
        return self.directory / wheel

    @property
    def complete(self) -> bool:
        """Its files are there: the wheel, or every file a C library build listed."""
        library = self.manifest.library
        if self.kind == "library":
            return library is not None and all((self.directory / name).is_file() for name in library.files)
        return self.wheel_path.exists()

    @property
    def runner_path(self) -> Path | None:
        """The native runner next to the manifest, when the build made one."""
        runner = self.manifest.native_runner
        return self.directory / runner.file if runner and runner.file else None

    @property
    def target(self) -> str:
        return self.manifest.target

    @property
    def variant(self) -> str:
        return self.manifest.variant

    @property
    def ort_version(self) -> str:
        return self.manifest.ort_version

    @property
    def created(self) -> str:
        return self.manifest.created or ""


def artifact_dir(
    target: str, variant: str, ort_version: str, root: Path | None = None, *, kind: ArtifactKind = "wheel"
) -> Path:
    """Where an artifact lives; a C library build beside the wheel of the same release (never in
    place of it): ``<ort-version>-library``."""
    leaf = ort_version + (LIBRARY_SUFFIX if kind == "library" else "")
    return (root or artifacts_dir()) / target / variant / leaf


def read_manifest(path: Path) -> Manifest:
    """``manifest.json`` as a Manifest; a ManifestError naming the file (and the key) when it is not one."""
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ManifestError(
            f"{path}: not valid JSON: {error}",
            hint="rebuild the artifact (orch build) or remove its directory",
        ) from error
    return Manifest.from_json(document, source=path)


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True, default=str))
    tmp.replace(path)
    return path


def list_artifacts(root: Path | None = None) -> list[Artifact]:
    """Every artifact whose manifest and files (wheel, or C library) exist, oldest first."""
    base = root or artifacts_dir()
    found = []
    for manifest_path in sorted(base.glob("*/*/*/manifest.json")):
        artifact = Artifact(directory=manifest_path.parent, manifest=read_manifest(manifest_path))
        if artifact.complete:
            found.append(artifact)
    return sorted(found, key=lambda a: a.created)


def find_artifact(target: str, variant: str | None = None, root: Path | None = None) -> Artifact:
    """The newest good artifact for a target (and variant); a clear error when there is none."""
    candidates = [
        a
        for a in list_artifacts(root)
        if a.target == target and (variant is None or a.variant == variant) and a.manifest.preflight_ok
    ]
    if not candidates:
        what = f"target '{target}'" + (f", variant '{variant}'" if variant else "")
        raise UsageError(
            f"no built artifact for {what} in {root or artifacts_dir()}",
            hint=f"build one first: orch build --target {target}"
            + (f" --variant {variant}" if variant else ""),
        )
    return candidates[-1]
