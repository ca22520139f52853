"""A key that hands typed text on (send, submit) is never a priority binding.

A priority binding runs when the App takes the key from its queue, while the keys and
pastes before it may still wait in the focused editor's queue: the text sent would be
what the editor held a moment earlier (a paste and ctrl+s in one burst lost the paste's
end). A plain binding reaches the screen through the editor's queue, after them."""

from __future__ import annotations

from eviscene_tui.ui.actions import ACTIONS

#: the actions that read what an editor or input holds and hand it on
READS_TYPED_TEXT = {"send", "submit", "save"}


def test_no_key_that_hands_typed_text_on_is_a_priority_binding():
    offenders = [a.id for a in ACTIONS if a.action in READS_TYPED_TEXT and a.priority]
    assert offenders == []


def test_the_rule_sees_the_actions_it_guards():
    # the guard would pass vacuously if the registry named these actions otherwise
    assert {a.action for a in ACTIONS} >= READS_TYPED_TEXT
