"""The build image, made on an engine: found there, sent from the workstation's engine, or built on
its base image (bootstrapped offline when possible). What the image is (its tag, base, package
lists) is planned in ``image_plan``; this module only talks to engines about it, and says what a
run refuses when the base image cannot be had."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.builds.image_plan import ImagePlan
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.toolchain import SYSROOT_WAYS
from orchestrator.errors import BuildError
from orchestrator.lab.base_images import base_image_variable, ensure_base_image

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

Log = Callable[[str], None]


def ensure_build_image(engine: Engine, plan: BuildPlan, log: Log, *, local: Engine | None = None) -> str:
    """The build image's id on ``engine``: sent from ``local`` when that has it (same tag = same
    inputs), else built there on the base image (bootstrapped offline when possible)."""
    return _ensure_image(engine, plan, plan.image, log, local=local)


def _ensure_image(
    engine: Engine, plan: BuildPlan, image: ImagePlan, log: Log, *, local: Engine | None
) -> str:
    existing = engine.image_id(image.tag) or _sent_from(local, engine, image.tag, log)
    if existing:
        return existing
    if image.under is not None:  # a layer: the image below first, made as a build image is
        _ensure_image(engine, plan, image.under, log, local=local)
    else:
        ensure_base_image_on(engine, plan, log, local=local)
    log(f"building image {image.tag} from {image.dockerfile.name} on {image.base_image}")
    return engine.build_image(
        context=image.context,
        dockerfile=image.dockerfile,
        tag=image.tag,
        buildargs=dict(image.buildargs),
        labels={"orch.role": "build", "orch.inputs": image.inputs_sha256, "orch.target": plan.target.name},
        on_log=log,
    )


def ensure_base_image_on(engine: Engine, plan: BuildPlan, log: Log, *, local: Engine | None = None) -> str:
    """The base image of the build image on ``engine``: bootstrapped offline, sent from ``local``, or
    (registry images) already there; a clear error when it cannot be had."""
    image = plan.image
    while image.under is not None:  # a layer's base is made from the image below it
        image = image.under
    if engine.image_id(image.base_image) or _sent_from(local, engine, image.base_image, log):
        return image.base_image
    if made_offline(plan):
        base = ensure_base_image(engine, str(image.base_suite), image.base_arch, on_log=log)
        if base != image.base_image:
            raise BuildError(f"base image tag changed while planning ({image.base_image} vs {base})")
        return base
    raise missing_base_image(plan, engine.label)


def made_offline(plan: BuildPlan) -> bool:
    """Whether orch makes the plan's base image itself (debootstrap), so no engine must have it."""
    return plan.image.base_made_offline


def base_image_refusal(engine: Engine, plan: BuildPlan, *, local: Engine | None = None) -> BuildError | None:
    """What the real run refuses before any download when the build image cannot be made: its base
    image is a registry image that neither ``engine`` nor ``local`` has. Asked by ``--dry-run`` too,
    so that both refuse alike (None: the image is there, or orch makes it offline)."""
    image = plan.image
    engines = [engine] if local is None or local is engine else [engine, local]
    if made_offline(plan) or any(e.image_id(image.tag) or e.image_id(image.base_image) for e in engines):
        return None
    return missing_base_image(plan, engine.label)


def missing_base_image(plan: BuildPlan, engine_label: str) -> BuildError:
    """The one message naming every way to get the base image that really works for this target."""
    image, target = plan.image, plan.target
    variable = base_image_variable(target.os.codename)
    ways = [
        (
            f"pull it where a registry is reachable (docker pull {image.base_image}) or point {variable}"
            " at an image you have"
        ),
        f"load a saved one (docker load -i {image.base_image.replace(':', '_').replace('/', '_')}.tar)",
    ]
    if image.base_suite:
        # Only a registry override stops orch from making a Debian image offline.
        ways.append(f"unset {variable}: orch makes the {image.base_suite} image offline with debootstrap")
    else:
        ways.append(SYSROOT_WAYS)
    listed = "; ".join(f"({number}) {way}" for number, way in enumerate(ways, start=1))
    return BuildError(
        f"the build image for target '{target.name}' needs the base image '{image.base_image}', "
        f"which {engine_label} does not have and cannot pull without a registry",
        hint=f"{len(ways)} ways: {listed}. `--dry-run` shows the plan and this same refusal",
    )


def _sent_from(local: Engine | None, engine: Engine, tag: str, log: Log) -> str | None:
    """``tag`` sent to ``engine`` from the workstation's engine when only that one has it (same tag,
    same inputs); its id there, or None."""
    if local is None or local is engine or not local.image_id(tag):
        return None
    return local.ship_image(tag, engine, on_log=log)
