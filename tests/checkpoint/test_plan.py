"""The pure core of an undo: which turns, which paths go back, which are left to the user."""

from __future__ import annotations

from zcoder.checkpoint.plan import Entry, Kept, TurnView, pick_turns, plan_undo

A = Entry("100644", "a" * 40)
B = Entry("100644", "b" * 40)
C = Entry("100644", "c" * 40)
X = Entry("100755", "a" * 40)  # A with the executable bit


def view(n: int, touched: set[str], before: dict[str, Entry], after: dict[str, Entry]) -> TurnView:
    return TurnView(n, frozenset(touched), before, after)


def test_undo_takes_the_last_standing_turn_and_rewind_every_later_one() -> None:
    assert pick_turns([1, 2, 4], None, 4) == [4]
    assert pick_turns([1, 2, 4], 2, 4) == [2, 4]
    assert pick_turns([1, 2, 4], 3, 4) == (
        "no turn 3 to take back: /rewind lists the turns still standing (1, 2, 4)"
    )
    assert pick_turns([], None, 0) == "nothing to undo: no turn of this session has changed files"
    assert pick_turns([], None, 2) == (
        "nothing to undo: every turn of this session that changed files is taken back"
    )


def test_a_turns_own_changes_go_back_created_files_are_removed() -> None:
    turn = view(1, {"a", "new", "gone"}, {"a": A, "gone": C}, {"a": B, "new": C})
    plan = plan_undo([turn], {"a": B, "new": C})
    assert plan.restore == {"a": A, "new": None, "gone": C}
    assert plan.kept == ()


def test_a_mode_change_is_restored_as_a_change() -> None:
    plan = plan_undo([view(1, {"run.sh"}, {"run.sh": A}, {"run.sh": X})], {"run.sh": X})
    assert plan.restore == {"run.sh": A}


def test_a_file_the_user_changed_since_is_kept_and_named() -> None:
    turn = view(3, {"a", "b"}, {"a": A, "b": A}, {"a": B, "b": B})
    plan = plan_undo([turn], {"a": C, "b": B})
    assert plan.restore == {"b": A}
    assert plan.kept == (Kept("a", 3, A),)


def test_a_file_the_user_deleted_since_is_kept_deleted() -> None:
    plan = plan_undo([view(1, {"a"}, {}, {"a": B})], {})
    assert plan.restore == {}
    assert plan.kept == (Kept("a", 1, None),)


def test_an_edit_between_two_undone_turns_keeps_the_file() -> None:
    """Turn 1 wrote a, the user edited a, turn 2 ran (not touching a): undoing both must not
    throw the user's edit away, though a is now as turn 2 found it."""
    first = view(1, {"a"}, {"a": A}, {"a": B})
    second = view(2, {"z"}, {"a": C}, {"a": C, "z": A})
    plan = plan_undo([first, second], {"a": C, "z": A})
    assert plan.kept == (Kept("a", 1, A),)
    assert plan.restore == {"z": None}


def test_two_turns_on_one_file_go_back_to_before_the_first() -> None:
    first = view(1, {"a"}, {"a": A}, {"a": B})
    second = view(2, {"a"}, {"a": B}, {"a": C})
    assert plan_undo([first, second], {"a": C}).restore == {"a": A}


def test_a_file_already_as_before_needs_nothing() -> None:
    plan = plan_undo([view(1, {"a"}, {"a": A}, {"a": A})], {"a": A})
    assert plan.restore == {}
    assert plan.unchanged == ("a",)


def test_a_path_no_turn_touched_is_never_looked_at() -> None:
    """OpenCode's /undo deleted a file the user made after a turn that only read it."""
    turn = view(1, {"a"}, {"a": A}, {"a": B})
    plan = plan_undo([turn], {"a": B, "made-by-user": C})
    assert set(plan.restore) == {"a"}


def test_a_path_over_the_size_cap_now_is_kept_whatever_it_was() -> None:
    turn = view(1, {"data.csv", "a"}, {"data.csv": A, "a": A}, {"a": B})
    plan = plan_undo([turn], {"a": B}, {"data.csv"}, "it is large now")
    assert plan.restore == {"a": A}
    assert plan.kept == (Kept("data.csv", 1, A, "it is large now"),)
