"""The shared compiler cache and orch's settings file, without an engine: addresses, the plan, and
mistakes named by file, line and key (exit 2), refused the same by ``--dry-run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.builds.config import load_config
from orchestrator.builds.endpoints import parse_cache_url
from orchestrator.errors import UsageError

SCOPE = ("build", "--target", "lab", "--variant", "tuned", "--scope", "mlas-test", "--dry-run")


def test_a_redis_address_becomes_the_relay_socket_inside_the_offline_build() -> None:
    cache = parse_cache_url("redis://127.0.0.1:6379")
    assert (cache.host, cache.port, cache.display) == ("127.0.0.1", 6379, "redis://127.0.0.1:6379")
    assert cache.environment() == {"CCACHE_REMOTE_STORAGE": "redis+unix:/orch-cache/redis.sock"}
    secret = parse_cache_url("redis://:s%40cret@cache.lan/2", remote_only=True)
    # ccache reads a password from the user part of the socket URL; the display never shows it.
    assert secret.ccache_url() == "redis+unix://s%40cret@localhost/orch-cache/redis.sock?db=2"
    assert secret.port == 6379 and secret.display == "redis://:***@cache.lan:6379/2"
    assert secret.environment()["CCACHE_REMOTE_ONLY"] == "true"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://cache.lan/ccache/", "only Redis"),
        ("redis:/127.0.0.1", "not a Redis address"),
        ("redis://:6379", "names no host"),
        ("redis://h:99999", "1..65535"),
        ("redis://h:6379/cache", "database number"),
        ("redis://h?x=1", "no query"),
    ],
)
def test_a_bad_cache_address_is_refused_naming_it(url: str, words: str) -> None:
    with pytest.raises(UsageError, match=words) as caught:
        parse_cache_url(url)
    assert url in caught.value.message


def test_the_plan_shows_the_shared_cache_and_keeps_the_build_offline(orch_env, orch_cli) -> None:
    result = orch_cli(orch_env, *SCOPE, "--cache", "redis://:hunter2x@127.0.0.1:6380", "--json", check=True)
    plan = json.loads(result.stdout)
    assert plan["network"] == "none"
    assert plan["remote_cache"]["url"] == "redis://:***@127.0.0.1:6380"
    assert "hunter2x" not in result.stdout + result.stderr, "the password must not be printed"
    assert plan["ccache_volume"] == "orch-ccache-lab"
    text = orch_cli(orch_env, *SCOPE, "--cache", "redis://127.0.0.1", check=True).stderr
    assert "shared compiler cache: redis://127.0.0.1:6379" in text and "stays none" in text


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "orch.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("build:\n  cahce: redis://h\n", ":2: build.cahce: unknown key (did you mean 'cache'?)"),
        ("bild: {}\n", ":1: bild: unknown key (did you mean 'build'?)"),
        ("build:\n  cache: 6379\n", ":2: build.cache: must be a non-empty string"),
        ("build:\n\n  cache: http://h/\n", ":3: build.cache: value 'http://h/': only Redis"),
        ("build:\n  remote_cache_only: yes please\n", ":2: build.remote_cache_only: must be true or false"),
        ("build:\n  engines:\n    - local\n    - ftp://x\n", ":4: build.engines[1]: --docker-host 'ftp://x'"),
        ("build:\n  engines: [local, local]\n", ":2: build.engines[1]: 'local' is listed twice"),
        ("build: [cache]\n", ":1: build: must be a mapping"),
        ("build:\n  cache: [unclosed\n", ":3: not valid YAML"),
    ],
)
def test_a_settings_file_mistake_names_file_line_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_config(path)
    assert caught.value.message.startswith(str(path)), caught.value.message
    assert where in caught.value.message, caught.value.message


def test_settings_are_read_and_the_command_line_wins(tmp_path: Path, orch_env, orch_cli) -> None:
    path = _write(
        tmp_path, "build:\n  cache: redis://10.0.0.5:7000\n  remote_cache_only: true\n  engines: [local]\n"
    )
    config = load_config(path)
    assert config.build.cache == "redis://10.0.0.5:7000" and config.build.remote_cache_only
    assert config.build.engines == ("local",)
    env = {**orch_env, "ORCH_CONFIG": str(path)}
    from_file = json.loads(orch_cli(env, *SCOPE, "--json", check=True).stdout)
    assert from_file["remote_cache"] == {
        "url": "redis://10.0.0.5:7000",
        "remote_only": True,
        "ccache_remote_storage": "redis+unix:/orch-cache/redis.sock",
    }
    overridden = json.loads(
        orch_cli(env, *SCOPE, "--cache", "redis://127.0.0.1", "--json", check=True).stdout
    )
    assert overridden["remote_cache"]["url"] == "redis://127.0.0.1:6379"
    assert overridden["remote_cache"]["remote_only"] is False


def test_a_bad_settings_file_fails_the_dry_run_like_the_real_run(tmp_path: Path, orch_env, orch_cli) -> None:
    path = _write(tmp_path, "build:\n  cache: redis://h:0\n")
    env = {**orch_env, "ORCH_CONFIG": str(path)}
    for extra in ((), ("--dry-run",)):
        result = orch_cli(env, *[a for a in SCOPE if a != "--dry-run"], *extra)
        assert result.returncode == 2, result.stderr
        assert f"{path}:2: build.cache" in result.stderr and "port 0" in result.stderr
        assert "Traceback" not in result.stderr


def test_remote_cache_only_without_a_cache_is_refused(orch_env, orch_cli) -> None:
    result = orch_cli(orch_env, *SCOPE, "--remote-cache-only")
    assert result.returncode == 2 and "--remote-cache-only needs a shared cache" in result.stderr
    stock = orch_cli(orch_env, "build", "--target", "lab", "--variant", "stock", "--cache", "redis://h")
    assert stock.returncode == 2 and "--cache" in stock.stderr
