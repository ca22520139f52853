"""The actions registry: every key binding of the app, declared once.

Each :class:`Action` has a stable id (the name a ``[keys]`` table in the config file
overrides), its default key, the Textual action it runs, the footer label, the help
line and, when it is worth offering there, a command-palette title ("noun: verb").
Screens and widgets take their ``BINDINGS`` from :func:`bindings`; the help screen
lists :data:`SECTIONS` in order; the palette offers the commands of the bindings
active on the current screen, each with the key that runs it. Nothing here reads
run data: every string is the app's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App
from textual.binding import Binding, BindingType

from eviscene_tui.state.runs import FILTERS


@dataclass(frozen=True, slots=True)
class Action:
    id: str  # keymap id, e.g. "runs.search"
    scope: str  # the section (screen or widget) the binding belongs to
    key: str  # default key(s), comma separated (Textual key names)
    action: str  # the Textual action string, e.g. "filter('all')"
    label: str  # footer label
    help: str = ""  # one line for the help screen and the footer tooltip
    command: str | None = None  # command-palette title ("noun: verb"); None = not in the palette
    show: bool = True  # shown in the footer
    priority: bool = False  # checked before the focused widget's bindings


# section scope -> title, in the order the help screen lists them
SECTIONS: dict[str, str] = {
    "app": "Everywhere",
    "runs": "Runs screen",
    "table": "Runs table",
    "sort": "Sort chooser",
    "group": "Group chooser",
    "case": "Case screen",
    "trace": "Source trace",
    "search": "Trace search box",
    "detail": "Step detail",
    "goto": "Go to step",
    "label": "Triage label",
    "confirm": "Confirmation",
    "stream": "Stream screen",
    "gate": "Operator gate",
    "gate.card": "Operator gate: decision card",
    "gate.calls": "Operator gate: policy calls of the running round",
    "dialog": "Operator dialogs",
    "dialog.tristate": "Operator dialogs: checker value",
    "tokens": "Token inspector",
    "token_view": "Token inspector: token view",
    "help": "Help",
}


#: the footer / help label of each runs filter (a noun, not the first word of its title)
FILTER_LABELS = {
    "all": "All", "triage": "Triage", "nosite": "No site", "converged": "Converged", "running": "Running",
    "paused": "Paused", "ended": "Ended", "pending": "Pending", "problems": "Problems", "labelled": "Labelled",
    "awaiting": "Awaiting",
}


def _filters() -> tuple[Action, ...]:
    keys = {
        "all": "a", "triage": "t", "nosite": "n", "converged": "c", "running": "r", "paused": "p",
        "ended": "e", "pending": "v", "problems": "x", "labelled": "L", "awaiting": "w",
    }
    out = []
    for name, key in keys.items():
        flt = FILTERS[name]
        verb = "filter triage queue" if name == "triage" else f"filter {flt.title}"
        out.append(Action(f"runs.filter.{name}", "runs", key, f"filter('{name}')", FILTER_LABELS[name], flt.help, f"runs: {verb}", show=False))
    return tuple(out)


A = Action
ACTIONS: tuple[Action, ...] = (
    # -- everywhere
    A("app.help", "app", "question_mark", "help", "Help", "Keys of every screen (opens at this screen's section)", "app: show keys and help"),
    A("app.help_f1", "app", "f1", "help", "Help", "Keys of every screen", show=False),
    A("app.theme", "app", "ctrl+t", "toggle_theme", "Theme", "Switch between the dark and light theme", "theme: toggle dark / light"),
    A("app.quit", "app", "q", "quit", "Quit", "Quit eviscene-tui", "app: quit"),
    # -- runs screen
    A("runs.search", "runs", "slash", "search", "Search", "Incremental search over case ids and hint texts; the cursor goes to the first match", "runs: search"),
    A("runs.clear", "runs", "escape", "clear_search", "Clear", "Clear the search / close the search box", "runs: clear search"),
    *_filters(),
    A("runs.gate", "runs", "G", "open_gate", "Gate", "Open the operator gate of the highlighted gated search", "gate: open the highlighted search's gate", show=False),
    A("runs.unlabelled", "runs", "u", "toggle_unlabelled", "Unlabelled", "Show only the unlabelled cases of the current filter (again: all of them)", "runs: filter unlabelled cases"),
    A("runs.label", "runs", "l", "label_rows", "Label", "Label the selected cases (space selects), else the highlighted one", "runs: label selected cases"),
    A("runs.group", "runs", "b", "group_choose", "Group by", "Group the cases by label, category, no-site reason or status", "runs: group by"),
    A("runs.sort", "runs", "s", "sort_choose", "Sort by", "Choose the column to sort by (the current one again reverses)", "runs: sort by column"),
    A("runs.sort_next", "runs", "o", "sort_next", "Next sort", "Sort by the next column", "runs: sort by next column", show=False),
    A("runs.sort_reverse", "runs", "S", "sort_reverse", "Reverse", "Reverse the sort order", "runs: reverse sort"),
    A("runs.rescan", "runs", "ctrl+r", "rescan", "Rescan", "Discover, summarise and check every case again", "runs: rescan folder", show=False),
    # -- runs table
    A("table.up", "table", "up", "cursor(-1)", "Up", "Previous case", show=False),
    A("table.down", "table", "down", "cursor(1)", "Down", "Next case", show=False),
    A("table.pageup", "table", "pageup", "page(-1)", "Page up", "One page up", show=False),
    A("table.pagedown", "table", "pagedown", "page(1)", "Page down", "One page down", show=False),
    A("table.home", "table", "home", "edge(0)", "First", "First case", show=False),
    A("table.end", "table", "end", "edge(1)", "Last", "Last case", show=False),
    A("table.open", "table", "enter", "select", "Open case", "Open the highlighted case", "runs: open highlighted case"),
    A("table.mark", "table", "space", "mark", "Select", "Select / unselect the highlighted case (then l labels the selection)", "runs: select highlighted case"),
    A("sort.cancel", "sort", "escape", "cancel", "Cancel", "Close without changing the sort"),
    A("group.cancel", "group", "escape", "cancel", "Cancel", "Close without changing the grouping"),
    # -- case screen
    A("case.back", "case", "escape", "back", "Back", "Back to the runs screen", "case: back to runs"),
    A("case.failure", "case", "f", "goto_failure", "Failure", "Go to the localized failure step", "case: go to failure step"),
    A("case.next_policy", "case", "n", "policy(1)", "Next policy", "Next policy step", "case: next policy step"),
    A("case.prev_policy", "case", "p", "policy(-1)", "Prev policy", "Previous policy step", "case: previous policy step"),
    A("case.goto", "case", "colon", "goto_step", "Go to step", "Go to step N", "case: go to step N"),
    A("case.search", "case", "slash", "search", "Search", "Search the steps' text (tool args and results, thought, output): Enter / down next, up previous, Esc closes", "case: search the trace"),
    A("case.detail", "case", "enter", "step_detail", "Detail", "Full detail of the highlighted step", "case: show step detail"),
    A("case.wrap", "case", "w", "toggle_wrap", "Wrap", "Wrap the trace rows' thoughts and outputs instead of cutting them at the edge", "case: wrap trace rows"),
    A("case.reveal", "case", "v", "toggle_reveal", "Reveal privileged", "Show / hide gold, expected verdict, judge and localizer explanations, private context", "case: reveal privileged material"),
    A("case.tab.trace", "case", "1", "tab('trace')", "Trace tab", "Source trace", "case: show trace", show=False),
    A("case.tab.localization", "case", "2", "tab('localization')", "Localization tab", "Failure site and semantic localization", "case: show localization", show=False),
    A("case.tab.rounds", "case", "3", "tab('rounds')", "Rounds tab", "Rounds, feedback, proposals, attempts", "case: show rounds timeline", show=False),
    A("case.tab.compare", "case", "4", "tab('compare')", "Compare tab", "Source and teacher step side by side", "case: compare source and teacher step", show=False),
    A("case.tab.integrity", "case", "5", "tab('integrity')", "Integrity tab", "Every problem found in this case", "case: show integrity problems", show=False),
    A("case.problem", "case", "exclamation_mark", "next_problem", "Problem", "The next integrity problem: where it is shown and its message", "case: next problem"),
    A("case.stream", "case", "t", "open_stream", "Stream", "Stream a hinted teacher continuation", "case: stream teacher continuation"),
    A("case.repair", "case", "g", "open_repair", "Repair", "Run the bundled driver on this case under the gate (or attach to it)", "case: repair under the gate"),
    A("case.tokens", "case", "k", "open_tokens", "Tokens", "Token capture inspector for the highlighted step", "case: inspect token capture"),
    A("case.label", "case", "l", "triage_label", "Label", "Label the case (1-9 picks; the next case of the queue opens after)", "case: set triage label"),
    A("case.undo_label", "case", "u", "undo_label", "Undo label", "Undo the case's last triage change (its previous label comes back)", "case: undo last triage change"),
    A("case.next_case", "case", "right_square_bracket", "queue(1)", "Next case", "The next case of the runs table's current queue", "case: next case of the queue"),
    A("case.prev_case", "case", "left_square_bracket", "queue(-1)", "Prev case", "The previous case of the current queue", "case: previous case of the queue"),
    A("case.gate", "case", "G", "open_gate", "Gate", "The operator gate of this search's driver (eviscene-tui gate)", "case: open the driver's gate", show=False),
    A("case.reload", "case", "ctrl+r", "reload", "Reload", "Read the case again", "case: reload", show=False),
    # -- source trace
    A("trace.up", "trace", "up", "move(-1)", "Prev step", "Previous step", show=False),
    A("trace.down", "trace", "down", "move(1)", "Next step", "Next step", show=False),
    A("trace.pageup", "trace", "pageup", "page(-1)", "Page up", "One page up", show=False),
    A("trace.pagedown", "trace", "pagedown", "page(1)", "Page down", "One page down", show=False),
    A("trace.home", "trace", "home", "edge(0)", "First step", "First step", show=False),
    A("trace.end", "trace", "end", "edge(1)", "Last step", "Last step", show=False),
    A("search.next", "search", "down", "step(1)", "Next match", "Next step that matches"),
    A("search.previous", "search", "up", "step(-1)", "Previous match", "Previous step that matches"),
    A("search.close", "search", "escape", "close", "Close search", "Close the search box and clear its marks"),
    A("detail.close", "detail", "escape", "close", "Close", "Back to the case"),
    A("detail.close_enter", "detail", "enter", "close", "Close", "Back to the case", show=False),
    A("detail.tokens", "detail", "k", "tokens", "Tokens", "Token inspector on this step's capture"),
    A("goto.cancel", "goto", "escape", "cancel", "Cancel", "Close without moving"),
    *(A(f"label.pick{n}", "label", str(n), f"pick({n})", f"Label {n}", f"Record label {n} (numbered as listed) and close", show=n == 1)
      for n in range(1, 10)),
    A("label.clear", "label", "0", "pick(0)", "Clear", "Clear the case's label (the note stays) and close"),
    A("label.save", "label", "ctrl+s", "save", "Save", "Record the highlighted label with the note (also from the note)"),
    A("label.cancel", "label", "escape", "cancel", "Cancel", "Close without recording (asks first when the note was edited)"),
    A("confirm.yes", "confirm", "y,enter", "yes", "Go on", "Go on despite the warning"),
    A("confirm.no", "confirm", "n,escape", "no", "Cancel", "Do not go on"),
    # -- stream screen
    # not a priority key: it reaches the screen through the focused editor's queue, after
    # every key and paste that came before it, so what is sent is what the box shows
    A("stream.send", "stream", "ctrl+s", "send", "Send", "Send the hinted request to the policy (what the hint box shows)", "stream: send request"),
    A("stream.edit", "stream", "e", "edit_hint", "Edit hint", "Edit the repair hint (Esc leaves the editor; the text is kept as a draft)", "stream: edit hint"),
    A("stream.cancel", "stream", "ctrl+x", "cancel_stream", "Cancel", "Cancel the running continuation (closes the stream)", "stream: cancel continuation", priority=True),
    A("stream.request", "stream", "ctrl+r", "toggle_request", "Request", "Show or hide the exact request", "stream: show request", priority=True),
    A("stream.tokens", "stream", "k", "inspect_tokens", "Tokens", "Token inspector on the current or last continuation", "stream: inspect tokens"),
    A("stream.tokens_anywhere", "stream", "ctrl+o", "inspect_tokens", "Tokens", "Token inspector (also while typing the hint)", priority=True, show=False),
    A("stream.back", "stream", "escape", "back", "Back", "Back to the case (cancels a running stream)", "stream: back to case"),
    # -- operator gate of a driver search
    A("gate.back", "gate", "escape", "app.pop_screen", "Back", "Back to the runs screen", "gate: back"),
    A("gate.resume", "gate", "R", "resume", "Resume", "Start the stopped driver again under the gate (--resume); offered once the driver is gone after a stop", "gate: resume the stopped driver"),
    # the card's keys name verbs; which decision a verb takes is what the pending gate declares
    A("gate.approve", "gate.card", "a", "decide('approve')", "Approve", "Approve the round or the hint, or accept the attempt", "gate: approve"),
    A("gate.relocalize", "gate.card", "r", "decide('relocalize')", "Relocalize", "Run the round relocalized; pick the step in the trace", "gate: relocalize"),
    A("gate.stop", "gate.card", "s", "decide('stop')", "Stop", "Stop the search at this gate (resumable)", "gate: stop the search"),
    A("gate.reject", "gate.card", "x", "decide('reject')", "Reject", "Reject the hint or the attempt (reason)", "gate: reject"),
    A("gate.add", "gate.card", "n", "decide('add')", "Add hint", "Type or edit a hint (audited, then asked again)", "gate: add a hint"),
    A("gate.cancel", "gate.card", "c", "decide('cancel')", "Cancel stream", "Cancel the streaming continuation", "gate: cancel the continuation"),
    A("gate.call_tokens", "gate.calls", "enter", "open_call", "Tokens", "Open the token inspector on the highlighted completed policy call's capture",
      "gate: tokens of the highlighted policy call"),
    # -- every operator dialog: one convention (ctrl+s submits, esc cancels; Enter types)
    # not a priority key (nor label.save, stream.send): it reaches the dialog through the
    # focused field's queue, after every key and paste before it, so what is submitted is
    # what the fields show (tests/ui/test_typed_text_keys.py)
    A("dialog.submit", "dialog", "ctrl+s", "submit", "Submit", "Submit the dialog (what its fields show)"),
    A("dialog.cancel", "dialog", "escape", "cancel", "Cancel", "Close the dialog without deciding (asks first when something was typed)"),
    A("dialog.tristate.next", "dialog.tristate", "space,enter,right", "cycle(1)", "Next value", "Checker value: unset \u2192 true \u2192 false", show=False),
    A("dialog.tristate.previous", "dialog.tristate", "left", "cycle(-1)", "Previous value", "Checker value, backwards", show=False),
    A("dialog.tristate.true", "dialog.tristate", "t", "set('true')", "True", "Checker value true", show=False),
    A("dialog.tristate.false", "dialog.tristate", "f", "set('false')", "False", "Checker value false", show=False),
    A("dialog.tristate.unset", "dialog.tristate", "u", "set('unset')", "Unset", "Checker value unset (not judged)", show=False),
    # -- token inspector
    A("tokens.back", "tokens", "escape", "back", "Back", "Back to where the inspector was opened", "tokens: back"),
    A("tokens.search", "tokens", "slash", "open_prompt('search')", "Search", "Search by id (#248056) or by decoded text", "tokens: search"),
    A("tokens.goto", "tokens", "g", "open_prompt('jump')", "Go to offset", "Jump to an id offset", "tokens: go to offset"),
    A("tokens.captures", "tokens", "c", "pick", "Captures", "List every token capture of this case", "tokens: pick a capture"),
    A("tokens.hint_span", "tokens", "h", "jump_highlight", "Hint span", "Where the hint was inserted in the teacher prompt", "tokens: jump to the hint span"),
    A("tokens.next_image", "tokens", "i", "next_image", "Next image", "Next image-pad run", "tokens: next image"),
    A("tokens.side_by_side", "tokens", "s", "toggle_pair", "Side by side", "Student vs teacher prompt (or teacher vs source completion)", "tokens: side by side"),
    A("token_view.left", "token_view", "left", "cursor(-1)", "Prev token", "Previous token", show=False),
    A("token_view.right", "token_view", "right", "cursor(1)", "Next token", "Next token", show=False),
    A("token_view.up", "token_view", "up", "cursor_row(-1)", "Row up", "One row up", show=False),
    A("token_view.down", "token_view", "down", "cursor_row(1)", "Row down", "One row down", show=False),
    A("token_view.pageup", "token_view", "pageup", "cursor_page(-1)", "Page up", "One page up", show=False),
    A("token_view.pagedown", "token_view", "pagedown", "cursor_page(1)", "Page down", "One page down", show=False),
    A("token_view.home", "token_view", "home", "cursor_home", "First", "First token", show=False),
    A("token_view.end", "token_view", "end", "cursor_end", "Last", "Last token", show=False),
    A("token_view.next_match", "token_view", "n", "next_match", "Next match", "Next search match", "tokens: next match"),
    A("token_view.previous_match", "token_view", "N", "previous_match", "Prev match", "Previous search match", "tokens: previous match", show=False),
    A("token_view.logprobs", "token_view", "l", "toggle_overlay", "Logprobs", "Colour completion tokens by logprob", "tokens: toggle logprob colours"),
    A("token_view.mode", "token_view", "f", "toggle_mode", "Flow/grid", "Flowing text view or one cell per token", "tokens: toggle flow / grid view"),
    A("token_view.wider", "token_view", "plus,equals_sign", "cell_width(2)", "Wider", "Wider token cells", show=False),
    A("token_view.narrower", "token_view", "minus", "cell_width(-2)", "Narrower", "Narrower token cells", show=False),
    # -- help
    A("help.close", "help", "escape", "close", "Close", "Close the help"),
    A("help.close_q", "help", "question_mark", "close", "Close", "Close the help", show=False),
    A("help.close_f1", "help", "f1", "close", "Close", "Close the help", show=False),
)

BY_ID: dict[str, Action] = {a.id: a for a in ACTIONS}


def actions(scope: str) -> list[Action]:
    """The actions of one section, in declaration order."""
    return [a for a in ACTIONS if a.scope == scope]


def binding(action_id: str) -> Binding:
    a = BY_ID[action_id]
    return Binding(a.key, a.action, a.label, show=a.show, id=a.id, tooltip=a.help, priority=a.priority)


def bindings(scope: str) -> list[BindingType]:
    """The ``BINDINGS`` of a screen or widget: every action of its section."""
    found = actions(scope)
    if not found:
        raise KeyError(f"no actions registered for {scope!r}")
    return [binding(a.id) for a in found]


def applied_keymap(app: App[object]) -> dict[str, str]:
    """The keymap ``app.set_keymap`` applied (binding id -> keys), for the help, the footer
    cards and the palette to show the keys that really run an action. Textual keeps it in
    ``App._keymap`` and has no public getter; this is the one place that reads it."""
    return dict(app._keymap)


def effective_keys(action: Action, keymap: dict[str, str]) -> list[str]:
    """The key names that run ``action`` now (the user's ``[keys]`` override first)."""
    key = keymap.get(action.id, action.key)
    return [k.strip() for k in key.split(",") if k.strip()]


def _check_registry() -> None:
    """Ids are unique and every action's section is listed (at import: a typo fails at once)."""
    if len(BY_ID) != len(ACTIONS):
        seen: set[str] = set()
        dupes = [a.id for a in ACTIONS if a.id in seen or seen.add(a.id)]  # type: ignore[func-returns-value]  # set.add returns None: the `or` records the id
        raise ValueError(f"duplicate action ids: {dupes}")
    unknown = sorted({a.scope for a in ACTIONS} - set(SECTIONS))
    if unknown:
        raise ValueError(f"actions in sections the help does not list: {unknown}")


_check_registry()
