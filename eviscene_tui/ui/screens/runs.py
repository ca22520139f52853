"""The runs screen (home): every case under the opened folder, virtualized."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, cast

from rich.cells import cell_len
from textual import on
from textual.app import ComposeResult
from textual.content import Content
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from eviscene_tui.ui.actions import BY_ID, applied_keymap, bindings, effective_keys
from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.rows import COLUMNS, shorten_middle
from eviscene_tui.storage import workdir_beside
from eviscene_tui.state.runs import FILTERS, GROUPS, RunsStore
from eviscene_tui.ui.screens.label import TriageLabelScreen, TriagePick
from eviscene_tui.ui.widgets.runs_table import RunsTable
from eviscene_tui.ui.widgets.key_footer import KeyFooter
from eviscene_tui.gate.protocol import SESSION_FILE, sidecar_for
from eviscene_tui.state.gate import gate_marker
from eviscene_tui.state.scan import build_row, extra_rows, outside
from eviscene_tui.ui.messages import SummariesBatch, SupervisedChanged

REPAINT_INTERVAL = 0.4

# the filter bar's short name of each filter (its full title is in the palette and help)
FILTER_SHORT: dict[str, str] = {
    "all": "all",
    "triage": "triage",
    "nosite": "no-site",
    "converged": "converged",
    "running": "running",
    "paused": "paused",
    "ended": "ended",
    "pending": "pending",
    "problems": "problems",
    "labelled": "labelled",
    "awaiting": "awaiting",
}
GATE_REFRESH_INTERVAL = 1.0  # gate markers follow the sidecars' heartbeats (state.gate.gate_marker)

if TYPE_CHECKING:
    from eviscene_tui.ui.app import EvisceneApp

_POLICY_TEMPLATES = {
    "attested": "[b $success]$label[/] $text",
    "unattested": "[b $warning]$label[/] $text",
    "no policy": "[b $error]$label[/] $text",
}


def hidden_note(before: str, titles: list[str], width: int) -> str:
    """`` · not shown (narrow terminal): a, b`` in the room the status line has left after
    ``before``; shorter forms when it does not fit, down to a count of hidden columns."""
    names = ", ".join(titles)
    room = width - cell_len(before)
    for note in (
        f" \u00b7 not shown (narrow terminal): {names}",
        f" \u00b7 not shown: {names}",
        f" \u00b7 {len(titles)} column{'s' if len(titles) != 1 else ''} not shown (widen)",
        f" \u00b7 {len(titles)} hidden",
    ):
        if cell_len(note) <= room:
            return note
    return f" \u00b7 {len(titles)} hidden"


class SortChooser(ModalScreen[str | None]):
    """Pick the column to sort the runs table by (Enter); the current one is highlighted
    and picking it again reverses the order."""

    BINDINGS = bindings("sort")
    DEFAULT_CSS = """
    SortChooser { align: center middle; }
    SortChooser #sort-box { width: 64; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    SortChooser OptionList { height: auto; max-height: 20; }
    """

    def __init__(self, current: str, reverse: bool) -> None:
        super().__init__()
        self.current = current
        self.reverse = reverse

    def compose(self) -> ComposeResult:
        with Vertical(id="sort-box"):
            yield Static(Content("Sort the runs by (Enter picks; the current column again reverses)"))
            options = []
            for column in COLUMNS:
                mark = (" \u25bc" if self.reverse else " \u25b2") if column.key == self.current else ""
                options.append(Option(Content.assemble((column.title + mark, "bold"), ("  " + column.help, "dim")), id=column.key))
            yield OptionList(*options, id="sort-options")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = next((i for i, c in enumerate(COLUMNS) if c.key == self.current), 0)
        options.focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class GroupChooser(ModalScreen[str | None]):
    """Pick what to group the runs table by (Enter); "not grouped" first."""

    BINDINGS = bindings("group")
    DEFAULT_CSS = """
    GroupChooser { align: center middle; }
    GroupChooser #group-box { width: 60; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    GroupChooser OptionList { height: auto; max-height: 12; }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="group-box"):
            yield Static(Content("Group the runs by (Enter picks)"))
            options = [Option(Content("not grouped"), id="none")]
            options += [Option(Content(title), id=name) for name, title in GROUPS.items()]
            yield OptionList(*options, id="group-options")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = ["", *GROUPS]
        options.highlighted = names.index(self.current) if self.current in names else 0
        options.focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss("" if event.option_id == "none" else event.option_id)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _wrap_items(items: list[Content], width: int) -> list[Content]:
    """``items`` in lines of at most ``width`` cells, separated by a space; a line breaks
    between two items, never inside one (a filter's key, name and count stay together)."""
    lines: list[Content] = []
    line: list[Content] = []
    used = 0
    for item in items:
        if line and used + 1 + item.cell_length > width:
            lines.append(Content(" ").join(line))
            line, used = [], 0
        used += item.cell_length + (1 if line else 0)
        line.append(item)
    if line:
        lines.append(Content(" ").join(line))
    return lines


class RunsScreen(Screen):
    """Home screen. Filters are one key each; ``/`` searches case ids and hint texts."""

    BINDINGS = bindings("runs")

    def __init__(self) -> None:
        super().__init__()
        self._unsubscribe: Callable[[], None] | None = None
        self._refresh_pending = False
        self._cursor_to_first = False  # the search changed: the cursor goes to its first match

    def compose(self) -> ComposeResult:
        yield Static(id="runs-title", classes="title-bar", markup=False)
        yield Static(id="filter-bar", classes="filter-bar", markup=False)
        yield Input(placeholder="search case ids and hint texts (Enter: back to the table, Esc: clear)", id="search")
        yield RunsTable(id="runs-table")
        yield Static(id="runs-status", classes="status-bar", markup=False)
        yield Static(id="policy-status", classes="status-bar", markup=False)
        yield KeyFooter()

    @property
    def eviscene(self) -> EvisceneApp:
        """The app, as its own type (this screen runs only inside it)."""
        return cast("EvisceneApp", self.app)

    @property
    def store(self) -> RunsStore:
        return self.eviscene.store

    def on_mount(self) -> None:
        self._paint_title()
        self._unsubscribe = self.store.subscribe(self._store_changed)
        self.watch(self.app, "policy_status", self._policy_status_changed)
        self._repaint()
        self.query_one(RunsTable).focus()
        self.set_interval(GATE_REFRESH_INTERVAL, self._refresh_gates)

    def _paint_title(self) -> None:
        """The opened folder and where the app writes, before it writes anything (labels,
        searches, stream records): the two paths cut in the middle to fit the width."""
        options = self.eviscene.options
        root = safe_text(str(options.root), single_line=True, limit=400)
        beside = options.workdir == workdir_beside(options.root)
        work = safe_text(options.workdir.name if beside else str(options.workdir), single_line=True, limit=400)
        why = "beside it" if beside else safe_text(options.workdir_source, single_line=True, limit=60)
        fixed = cell_len("eviscene-tui    \u00b7 writes to  ()") + cell_len(why)
        room = max(16, (self.size.width or 120) - fixed)
        root_room = max(8, min(cell_len(root), room // 2 if cell_len(root) + cell_len(work) > room else room))
        root = shorten_middle(root, root_room)
        work = shorten_middle(work, max(8, room - cell_len(root)))
        self.query_one("#runs-title", Static).update(Content.from_markup(
            "eviscene-tui  [dim]$root  \u00b7 writes to[/] $work [dim]($why)[/]", root=root, work=work, why=why))

    def on_resize(self) -> None:
        self._paint_title()
        self._paint_filter_bar()  # the bar wraps between its items at the new width

    def on_screen_resume(self) -> None:
        # back from a case / supervised screen: re-read the supervised searches' files now
        self.app.post_message(SupervisedChanged())

    def _policy_status_changed(self, status: tuple[str, str] | None) -> None:
        bar = self.query_one("#policy-status", Static)
        bar.display = status is not None
        if status is None:
            return
        label, text = status
        template = _POLICY_TEMPLATES.get(label, _POLICY_TEMPLATES["unattested"])
        bar.update(Content.from_markup(
            template,
            label=f"policy {label.upper()}",
            text=safe_text(text, single_line=True, limit=400),
        ))

    def on_unmount(self) -> None:
        if self._unsubscribe:
            self._unsubscribe()

    def _store_changed(self, reason: str) -> None:
        # coalesce: many batches may arrive between two frames; while a big scan
        # streams in, repaint at most every REPAINT_INTERVAL (sorting 10k rows per
        # batch would make the scan quadratic)
        if self._refresh_pending:
            return
        self._refresh_pending = True
        store = self.store
        if reason in ("rows", "progress") and (store.scanning or store.checking) and len(store) > 500:
            self.set_timer(REPAINT_INTERVAL, self._repaint)
        else:
            self.call_later(self._repaint)

    def _repaint(self) -> None:
        self._refresh_pending = False
        store = self.store
        table = self.query_one(RunsTable)
        table.set_rows(store.visible(), sort_key=store.sort_key, sort_reverse=store.sort_reverse, groups=store.groups(),
                       selected=store.selected, longest=store.visible_stats().longest())
        if self._cursor_to_first:
            self._cursor_to_first = False
            table.cursor = 0
        self._paint_filter_bar()
        self._paint_status()

    def _paint_filter_bar(self) -> None:
        counts = self.store.counts()
        keymap = applied_keymap(self.app)
        parts: list[Content] = []
        for name in FILTER_SHORT:
            shown = ",".join(effective_keys(BY_ID[f"runs.filter.{name}"], keymap))
            label = Content.from_markup("[b]$k[/b] $t $n", k=shown, t=FILTER_SHORT[name], n=str(counts.get(name, 0)))
            if name == self.store.filter_name:
                label = label.stylize("reverse")
            parts.append(label)
        toggle = ",".join(effective_keys(BY_ID["runs.unlabelled"], keymap))
        unlabelled = Content.from_markup("[b]$k[/b] unlabelled only", k=toggle)
        parts.append(unlabelled.stylize("reverse") if self.store.unlabelled_only else unlabelled)
        bar = self.query_one("#filter-bar", Static)
        bar.update(Content("\n").join(_wrap_items(parts, bar.content_size.width or self.app.size.width - 2)))

    def _paint_status(self) -> None:
        store = self.store
        progress = ""
        if store.scanning:
            progress = f"\u27f3 scanning\u2026 {store.scan_done:,} cases read \u00b7 "
        elif store.checking:
            progress = f"\u27f3 checking integrity\u2026 {store.check_done:,} of {store.check_total:,} cases \u00b7 "
        text = progress + store.describe()
        if store.search.strip():
            table = self.query_one(RunsTable)
            matches = len(table.rows)
            text += f" \u00b7 match {table.cursor + 1} of {matches}" if matches else " \u00b7 no match"
        hidden = self.query_one(RunsTable).hidden_columns
        if hidden:
            text += hidden_note(text, [c.title for c in hidden], self.size.width or 10_000)
        if not store.scanning and len(store) == 0:
            root = safe_text(str(self.eviscene.options.root), single_line=True, limit=80)
            text = f"no PSD cases found under {root} (feedback search roots, run directories or multi-case wrappers)"
        self.query_one("#runs-status", Static).update(Content(text))

    @on(RunsTable.ColumnsChanged)
    def _columns_changed(self, _event: RunsTable.ColumnsChanged) -> None:
        self._paint_status()

    # -- actions -------------------------------------------------------------------------
    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("visible")
        box.focus()

    def action_clear_search(self) -> None:
        box = self.query_one("#search", Input)
        if not box.value and self.store.selected:
            self.store.clear_selection()  # Esc with no search: the selection goes first
            return
        if box.value:
            box.value = ""
        box.remove_class("visible")
        self.store.set_search("")
        self.query_one(RunsTable).focus()

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self._cursor_to_first = True
        self.store.set_search(event.value)

    @on(RunsTable.Highlighted)
    def _highlighted(self, event: RunsTable.Highlighted) -> None:
        if self.store.search.strip():
            self._paint_status()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.query_one(RunsTable).focus()

    def action_filter(self, name: str) -> None:
        self.store.set_filter(name)
        self.eviscene.save_view()
        self.notify(f"Filter: {FILTERS[name].title}", timeout=1.5, markup=False)

    def action_toggle_unlabelled(self) -> None:
        self.store.set_unlabelled_only(not self.store.unlabelled_only)
        self.eviscene.save_view()
        self.notify("Only the unlabelled cases" if self.store.unlabelled_only else "Labelled cases shown again", timeout=1.5, markup=False)

    def action_sort_next(self) -> None:
        key = self.store.cycle_sort(1)
        self.eviscene.save_view()
        self.notify(f"Sort by {key}", timeout=1.5, markup=False)

    def action_sort_choose(self) -> None:
        store = self.store

        def done(key: str | None) -> None:
            if key is not None:
                store.set_sort(key)  # the current column again: reversed
                self.eviscene.save_view()
                self.notify(f"Sort by {key}{' (reversed)' if store.sort_reverse else ''}", timeout=1.5, markup=False)

        self.app.push_screen(SortChooser(store.sort_key, store.sort_reverse), done)

    def action_sort_reverse(self) -> None:
        self.store.set_sort(self.store.sort_key, reverse=not self.store.sort_reverse)
        self.eviscene.save_view()

    def action_group_choose(self) -> None:
        store = self.store

        def done(name: str | None) -> None:
            if name is not None:
                self.group_by(name)

        self.app.push_screen(GroupChooser(store.group_by), done)

    def group_by(self, name: str) -> None:
        self.store.set_group(name)
        self.eviscene.save_view()
        self.notify(f"Grouped by {GROUPS[name]}" if name else "Not grouped", timeout=1.5, markup=False)

    # -- triage: selection and labelling ------------------------------------------------------
    @on(RunsTable.Marked)
    def _marked(self, event: RunsTable.Marked) -> None:
        self.store.toggle_selected(event.row.key)

    def action_label_rows(self) -> None:
        """Label the selected cases (space), else the highlighted one, in one pick."""
        rows = self.store.selected_rows()
        if not rows:
            current = self.query_one(RunsTable).current_row
            rows = [current] if current is not None else []
        if not rows:
            self.notify("No case to label", severity="warning", markup=False)
            return
        first = self.eviscene.triage.for_key(rows[0].record)
        same = len(rows) == 1 and first is not None
        title = safe_text(rows[0].key, single_line=True, limit=60)

        def done(pick: TriagePick | None) -> None:
            if pick is None:
                return
            self.eviscene.record_triage(rows, pick.label, pick.note)
            self.store.clear_selection()

        self.app.push_screen(TriageLabelScreen(title, self.eviscene.options.settings.triage.labels,
                                               first.label if same and first else "", first.note if same and first else "",
                                               count=len(rows)), done)

    def action_rescan(self) -> None:
        self.eviscene.start_scan()

    def sort_by(self, key: str) -> None:
        self.store.set_sort(key, reverse=False)

    @on(RunsTable.HeaderClicked)
    def _header_clicked(self, event: RunsTable.HeaderClicked) -> None:
        self.store.set_sort(event.column_key)

    @on(RunsTable.Selected)
    def _open(self, event: RunsTable.Selected) -> None:
        self.eviscene.open_case(event.row)

    # -- operator gate ---------------------------------------------------------------------
    def _refresh_gates(self) -> None:
        gated = [row for row in self.store.rows() if row.gate]
        extra = tuple(self.eviscene.options.gate_roots)
        if gated or extra:
            known = set(self.eviscene.case_index.paths())
            self.run_worker(lambda: self._gate_worker(gated, extra, known), thread=True, exclusive=True, group="runs-gates",
                            exit_on_error=False)

    def _gate_worker(self, rows: list, extra: tuple, known: set[str]) -> None:
        root = self.eviscene.options.root
        key_root = self.eviscene.options.key_root  # the base of the row keys (see scan_rows)
        outer = {str(p) for p in outside(root, extra)}
        changed = []
        for row in rows:
            path = getattr(row.ref, "path", None)
            marker = gate_marker(path) if path is not None else ""
            if marker != row.gate:
                if str(path) in outer:
                    # a gated root outside the opened folder is not watched: re-read its row
                    # whenever its gate moves, so its status follows the driver too
                    # read fully (as check does): its problem count is final, not "…" until ctrl+r
                    changed.append(build_row(row.ref, key_root, None, full=True, path_map=self.eviscene.options.path_map))
                else:
                    changed.append(replace(row, gate=marker))
        # a gated search the app was told about whose driver wrote its root after the scan
        changed.extend(extra_rows(root, extra, known, key_root))
        if changed:
            self.app.post_message(SummariesBatch(changed, done=len(changed), initial=False))

    def action_open_gate(self) -> None:
        """The gate of the highlighted case, or a message saying it has none."""
        row = self.query_one(RunsTable).current_row
        path = getattr(row.ref, "path", None) if row is not None else None
        if path is None or not (sidecar_for(path) / SESSION_FILE).is_file():
            name = safe_text(row.key, single_line=True, limit=80) if row is not None else "no case"
            self.notify(f"{name} has no operator gate (its driver was not run under eviscene-tui gate)", severity="warning",
                        markup=False)
            return
        self.eviscene.open_gate(path)

    # -- palette ---------------------------------------------------------------------------
    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """Sort by each column (the registry's commands, with their keys, come from the app)."""
        sorts = [(f"runs: sort by {column.title}", column.help, partial(self.sort_by, column.key)) for column in COLUMNS]
        groups = [(f"runs: group by {title}", f"order the cases by {title}, a header line per group", partial(self.group_by, name))
                  for name, title in GROUPS.items()]
        return [*sorts, *groups, ("runs: do not group", "one list again", partial(self.group_by, "")),
                ("runs: clear selection", "unselect every selected case", self.store.clear_selection)]
