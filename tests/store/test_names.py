"""Values from a log that become paths: each checked against its grammar, and a made path never leaves its folder."""

from __future__ import annotations

import hashlib

import pytest

from fae.errors import StoreError
from fae.harness.shards import shard_dir, shard_paths
from fae.store.bodies import body_path, copy_body, read_body_in
from fae.store.names import check_hash, check_run_id, inside

GOOD_HASH = hashlib.sha256(b"body").hexdigest()


@pytest.mark.parametrize(
    "digest",
    [
        GOOD_HASH.upper(),  # fae writes lowercase: another spelling names another file on most file systems
        GOOD_HASH[:-1],
        GOOD_HASH + "0",
        "../" + GOOD_HASH[3:],
        GOOD_HASH[:2] + "/" + GOOD_HASH[3:],
        "/" + GOOD_HASH[1:],
        "..x/../../escape",
        "",
        None,
        42,
    ],
)
def test_only_a_lowercase_sha256_is_a_body_hash(digest, tmp_path):
    with pytest.raises(StoreError, match="not a body hash"):
        check_hash(digest, "log L")
    with pytest.raises(StoreError, match="not a body hash"):
        read_body_in(tmp_path, digest, "log L")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="not a body hash"):
        copy_body(tmp_path / "log.duckdb", tmp_path / "out", digest)  # type: ignore[arg-type]
    assert sorted(tmp_path.iterdir()) == []


def test_a_body_hash_names_a_file_inside_the_body_folder(tmp_path):
    assert check_hash(GOOD_HASH, "log L") == GOOD_HASH
    path = body_path(tmp_path / "log.duckdb", GOOD_HASH)
    assert path.parent.parent == tmp_path / "log.duckdb.bodies" and path.name == GOOD_HASH[2:] + ".zst"


@pytest.mark.parametrize("run_id", ["task.v0.gold.r0", "a-b_c.replay2", "x" * 128])
def test_run_ids_fae_makes_pass(run_id):
    assert check_run_id(run_id, "log L") == run_id


@pytest.mark.parametrize("run_id", ["../x", "a/b", ".hidden", "", "x" * 129, "a b", "a\x1b[2J", None])
def test_run_ids_fae_never_makes_are_refused(run_id):
    with pytest.raises(StoreError, match="never makes"):
        check_run_id(run_id, "log L")


def test_a_path_outside_its_folder_is_refused_links_followed(tmp_path):
    folder = tmp_path / "out"
    (folder / "sub").mkdir(parents=True)
    assert inside(folder, folder / "sub" / "f") == folder / "sub" / "f"
    (folder / "link").symlink_to(tmp_path)
    for escaping in (folder / ".." / "f", folder / "link" / "f", tmp_path / "f", folder.with_name("out2") / "f"):
        with pytest.raises(StoreError, match="outside"):
            inside(folder, escaping)


def test_only_shards_fae_named_are_shards(tmp_path):
    log = tmp_path / "log.duckdb"
    folder = shard_dir(log)
    folder.mkdir()
    for name in ("worker-0.duckdb", "actor-12.duckdb", "evil.duckdb", "worker-0.duckdb.wal", "worker-x.duckdb"):
        (folder / name).write_bytes(b"")
    (folder / "worker-1.duckdb").symlink_to(tmp_path / "elsewhere.duckdb")
    assert [p.name for p in shard_paths(log)] == ["actor-12.duckdb", "worker-0.duckdb"]
