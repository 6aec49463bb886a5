"""How a send names its target: the shared-checkout warning and the model's state."""

from __future__ import annotations

from pathlib import Path

from tests.relay.helpers import make_manifest
from zcoder.app.relay.labels import SHARED_CHECKOUT, TargetNames, same_checkout
from zcoder.relay.registry import Peer


def _repo(root: Path, name: str, *, linked: bool = False) -> Path:
    path = root / name
    (path / "src").mkdir(parents=True)
    git = path / ".git"
    if linked:  # a linked worktree: .git is a file naming the main repository's gitdir
        git.write_text(f"gitdir: {root}/main/.git/worktrees/{name}\n")
    else:
        git.mkdir()
    return path


def test_one_working_tree_is_shared_a_worktree_is_not(tmp_path: Path) -> None:
    main = _repo(tmp_path, "main")
    linked = _repo(tmp_path, "feature", linked=True)
    assert same_checkout(main / "src", main)
    assert same_checkout(main, main / "src")
    assert not same_checkout(main, linked)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert same_checkout(plain, plain) and not same_checkout(plain, main)


def _names(tmp_path: Path, ours: Path, theirs: Path, model: str = "") -> TargetNames:
    names = TargetNames(ours)
    manifest = make_manifest(tmp_path, "4242-abcdef01", project="beta", workspace=str(theirs))
    names.remember_peers([Peer(manifest, "ready", model=model)])
    return names


def test_a_target_in_our_checkout_is_named_with_a_warning(tmp_path: Path) -> None:
    main = _repo(tmp_path, "main")
    names = _names(tmp_path, main, main / "src")
    assert SHARED_CHECKOUT in names.label("4242-abcdef01")
    assert "git worktree add" in names.checkout_note("4242-abcdef01")
    other = _names(tmp_path, main, _repo(tmp_path, "feature", linked=True))
    assert other.checkout_note("4242-abcdef01") == ""
    assert SHARED_CHECKOUT not in other.label("4242-abcdef01")


def test_a_target_whose_model_is_down_is_named_so(tmp_path: Path) -> None:
    names = _names(tmp_path, tmp_path / "a", tmp_path / "b", model="unavailable")
    assert names.label("4242-abcdef01").endswith(
        "· ready; its model server does not answer: the message waits for it"
    )
