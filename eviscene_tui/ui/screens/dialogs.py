"""Modal forms for operator decisions: one convention for every dialog.

Every operator dialog is a :class:`FormScreen`: it shows what it acts on
(``context``: the hint being rejected, the trace to pick a step from), text
fields, an optional multi-line editor (``TextArea``) and checker values
(:class:`TriState`: true / false / unset in words). The same keys everywhere:

- ``ctrl+s`` submits (the one submit key); when ``validate`` returns a message the
  dialog stays open with the message inside it and everything typed kept;
- ``escape`` cancels (closes without deciding); when anything was typed or changed it
  asks first (``y`` discards, ``n`` goes back to the dialog with everything kept);
- Enter never submits: in a one-line field it moves to the next field, in the editor
  it types a new line, in a step list it picks the step and moves to the note;
- a relocalize note is optional everywhere (it is the decision's journaled reason);
  a rejection's reason is required everywhere.

It dismisses with the values, or None. The gate's dialogs: :class:`ReasonPrompt`
(a stop, a hint rejection), :class:`StepPicker` (relocalize), :class:`HintEditor`
(add or edit a hint) and :class:`VerdictForm` (accept or reject an attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from rich.text import Text

from eviscene_tui.safe_text import safe_text
from eviscene_tui.state.gate import TraceStep
from eviscene_tui.ui.actions import bindings
from eviscene_tui.ui.screens.confirm import ConfirmScreen
from eviscene_tui.ui.widgets.untrusted_edit import UntrustedTextArea

TRI_VALUES = ("unset", "true", "false")
Validator = Callable[[dict[str, Any]], "str | None"]


class TriState(Widget, can_focus=True):
    """A checker value: ``unset``, ``true`` or ``false``, always written out.

    space / enter / ← → cycle; ``t``, ``f``, ``u`` set it directly."""

    BINDINGS = bindings("dialog.tristate")
    DEFAULT_CSS = """
    TriState { width: 20; height: 1; padding: 0 1; background: $boost; }
    TriState:focus { background: $accent 40%; text-style: bold; }
    """

    def __init__(self, value: str = "unset", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._value = value if value in TRI_VALUES else "unset"

    @property
    def value(self) -> str:
        return self._value

    @value.setter
    def value(self, value: str) -> None:
        if value not in TRI_VALUES:
            raise ValueError(f"a checker value is one of {', '.join(TRI_VALUES)}")
        self._value = value
        self.refresh()

    def render(self) -> Content:
        return Content.from_markup("◀ [b]$v[/] ▶", v=self._value)

    def action_cycle(self, step: int) -> None:
        self.value = TRI_VALUES[(TRI_VALUES.index(self._value) + step) % len(TRI_VALUES)]

    def action_set(self, value: str) -> None:
        self.value = value

    def on_click(self) -> None:
        self.action_cycle(1)


class FormScreen(ModalScreen["dict[str, Any] | None"]):
    """A small form; see the module docstring."""

    KEYS_HINT = "ctrl+s submits · esc cancels"
    TRACE_LABEL = "source trace (enter on a step picks it; policy steps are marked ●)"

    BINDINGS = bindings("dialog")
    DEFAULT_CSS = """
    FormScreen { align: center middle; }
    FormScreen #form { width: 96; max-width: 100%; height: auto; max-height: 95%; border: round $accent; background: $surface; padding: 0 1; }
    FormScreen #form-context { height: auto; max-height: 8; color: $text-muted; }
    FormScreen #form-trace { height: 10; }
    FormScreen TextArea { height: 8; }
    FormScreen .checker-row { height: 1; margin-bottom: 1; }
    FormScreen .checker-row Static { width: 30; }
    FormScreen #form-error { color: $error; height: auto; }
    FormScreen #form-buttons { height: 3; }
    """

    def __init__(
        self,
        title: str,
        fields: Sequence[tuple[str, str, str]],
        *,
        context: str | Text | None = None,
        trace: Sequence[tuple[int, bool, str]] | None = None,
        trace_at: int | None = None,
        editor: str | None = None,
        editor_text: str = "",
        checker: Sequence[str] = (),
        validate: Validator | None = None,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.fields = list(fields)
        self.context = context
        self.trace = list(trace) if trace is not None else None
        self.trace_at = trace_at  # the step the trace list starts highlighted on (the current site)
        self.editor = editor
        self.editor_text = editor_text
        self.checker = list(checker)
        self.validate = validate
        self.error = ""
        self.initial: dict[str, Any] | None = None  # the values as the dialog opened (what Esc compares)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="form"):
            yield Static(Content.from_markup("[b]$t[/]  ($keys)", t=self.title_text, keys=self.KEYS_HINT))
            if isinstance(self.context, Text):  # built from sanitised parts by the caller
                yield Static(self.context, id="form-context")
            elif self.context:
                yield Static(safe_text(self.context, limit=2000), id="form-context", markup=False)
            if self.trace is not None:
                yield Static(self.TRACE_LABEL, markup=False)
                yield OptionList(*self.trace_options(), id="form-trace")
            for name, label, placeholder in self.fields:
                yield Static(label, markup=False)
                yield Input(placeholder=placeholder, id=f"f-{name}")
            if self.editor:
                yield Static(self.editor + " (Enter types a new line)", markup=False)
                # the prefill (a locked hint) comes from the run: shown sanitised
                yield UntrustedTextArea(self.editor_text, id="f-editor", soft_wrap=True)
            if self.checker:
                yield Static("checker values (unset = not judged)", markup=False)
                for name in self.checker:
                    with Horizontal(classes="checker-row"):
                        yield Static(name, markup=False)
                        yield TriState(id=f"c-{name}")
            yield Static("", id="form-error", markup=False)
            with Horizontal(id="form-buttons"):
                yield Button("Submit", id="form-ok", variant="primary")
                yield Button("Cancel", id="form-cancel")

    def trace_options(self) -> list[Option]:
        """One option per trace step (``step-<i>``); only policy steps can be picked."""
        return [
            Option(
                Content.from_markup(
                    "$mark $i  $what", mark="●" if policy else " ", i=f"{i:>3}",
                    what=safe_text(summary, single_line=True, limit=120),
                ),
                id=f"step-{i}",
                disabled=not policy,
            )
            for i, policy, summary in self.trace or ()
        ]

    def trace_start(self) -> int | None:
        """The option the trace list opens on: the current site, else the first policy step."""
        trace = self.trace or []
        at = next((n for n, (i, policy, _s) in enumerate(trace) if i == self.trace_at and policy), None)
        return at if at is not None else next((n for n, (_i, policy, _s) in enumerate(trace) if policy), None)

    def on_mount(self) -> None:
        self.initial = self.typed()
        if self.trace is not None:
            # a step is picked from the trace: the list has the keys, highlighting the current site
            steps = self.query_one("#form-trace", OptionList)
            at = self.trace_start()
            steps.focus()
            if at is not None:
                steps.highlighted = at
                steps.scroll_to_highlight()
            return
        # the editor is the form's main field when there is one; otherwise the first input
        inputs = self.query("TextArea") or self.query("Input")
        if inputs:
            first = inputs.first()
            first.focus()
            if isinstance(first, TextArea):
                first.move_cursor(first.document.end)

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: self.query_one(f"#f-{name}", Input).value for name, _, _ in self.fields}
        if self.editor:
            out["editor"] = self.query_one("#f-editor", UntrustedTextArea).value
        if self.checker:
            checker = {}
            for name in self.checker:
                v = self.query_one(f"#c-{name}", TriState).value
                if v in ("true", "false"):
                    checker[name] = v == "true"
            out["checker"] = checker
        return out

    def show_error(self, text: str) -> None:
        self.error = text
        self.query_one("#form-error", Static).update(safe_text(text, limit=600))

    def action_submit(self) -> None:
        values = self.values()
        if self.validate is not None:
            problem = self.validate(values)
            if problem:
                self.show_error(problem)
                return
        self.dismiss(values)

    def typed(self) -> dict[str, Any]:
        """What the operator typed or set: the fields, the editor, the checker values (a
        highlighted step of a trace list is where the keys are, not something typed)."""
        return FormScreen.values(self)

    def edited(self) -> bool:
        """Something was typed or set since the dialog opened."""
        return self.initial is not None and self.typed() != self.initial

    def action_cancel(self) -> None:
        if not self.edited():
            self.dismiss(None)
            return

        def done(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)

        self.app.push_screen(
            ConfirmScreen(f"{self.title_text}: not submitted", ["What you typed or changed in this dialog is not saved."],
                          "Discard it and close?"),
            done,
        )

    @on(Button.Pressed, "#form-ok")
    def _ok(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#form-cancel")
    def _cancel(self) -> None:
        self.action_cancel()

    @on(Input.Submitted)
    def _enter(self, event: Input.Submitted) -> None:
        """Enter in a one-line field moves on to the next field, if any (ctrl+s submits)."""
        event.stop()
        fields = list(self.query("Input, TextArea, TriState"))
        if event.input in fields and fields.index(event.input) + 1 < len(fields):
            fields[fields.index(event.input) + 1].focus()

    @on(OptionList.OptionSelected, "#form-trace")
    def _pick_step(self, event: OptionList.OptionSelected) -> None:
        if not event.option.id:
            return
        names = [name for name, _, _ in self.fields]
        if "step" in names:
            self.query_one("#f-step", Input).value = event.option.id.removeprefix("step-")
            # the step is set: the keys go to the next field (the note), else to the step's input
            after = names[names.index("step") + 1] if names.index("step") + 1 < len(names) else "step"
        elif names:
            after = names[0]  # the pick is the list's highlight: the keys go to the first field
        else:
            return
        self.query_one(f"#f-{after}", Input).focus()


# ---------------------------------------------------------------------- the gate's dialogs
# Centred boxes over the gate screen (kept visible, dimmed) that fit an 80x24 terminal
# (the form scrolls when taller), say what they act on (``context``), and keep what was
# typed when they refuse it (the message shows inside the dialog).
class ReasonPrompt(FormScreen):
    """The reason of a stop or a rejection. ``context`` names what the decision acts on
    (the hint and its audit, the round's feedback); with ``required`` an empty reason is
    refused in the dialog."""

    def __init__(self, title: str, context: Text | None = None, *, required: bool = False) -> None:
        placeholder = "reason (journaled)" + ("; required" if required else "; optional")
        super().__init__(title, [("reason", "reason", placeholder)], context=context,
                         validate=self._reason_given if required else None)

    @staticmethod
    def _reason_given(values: dict[str, Any]) -> str | None:
        return None if str(values.get("reason") or "").strip() else "a reason is required: say why (it goes to the journal)"


class StepPicker(FormScreen):
    """Relocalize: pick the earliest error step K in the source trace (or none), then an
    optional note. The list opens on the current site; ``warning`` says what the driver
    will do with the step (a site its localizer keeps whatever is picked)."""

    TRACE_LABEL = "source trace (▶ the current site)"
    NO_STEP = "no-step"

    def __init__(self, steps: tuple[TraceStep, ...], current: int | None, context: Text | None = None, *,
                 allowed: tuple[int, ...] | None = None, step_required: bool = False) -> None:
        title = "Relocalize: pick the earliest error step (current site: step %s)" % ("—" if current is None else current)
        super().__init__(title, [("note", "note", "note (journaled; optional)")], context=context,
                         trace=[(s.index, allowed is None or s.index in allowed, s.label) for s in steps], trace_at=current,
                         validate=self._step_picked)
        self.steps = steps
        self.current = current
        self.allowed = allowed
        self.step_required = step_required

    def trace_options(self) -> list[Option]:
        options = [Option(Content("no step: relocalize without naming one"), id=self.NO_STEP, disabled=self.step_required)]
        options += [
            Option(Content.assemble(("▶ " if s.index == self.current else "  ", "bold"), f"{s.index:>3}  {s.stage}  {s.label}"),
                   id=f"step-{s.index}", disabled=self.allowed is not None and s.index not in self.allowed)
            for s in self.steps
        ]
        return options

    def trace_start(self) -> int:
        return next((n + 1 for n, s in enumerate(self.steps) if s.index == self.current), 0)

    def values(self) -> dict[str, Any]:
        out = super().values()
        options = self.query_one("#form-trace", OptionList)
        index = options.highlighted
        option_id = options.get_option_at_index(index).id if index is not None else None
        out["picked"] = index is not None
        out["step"] = None if option_id in (None, self.NO_STEP) else int(str(option_id).split("-", 1)[1])
        return out

    def _step_picked(self, values: dict[str, Any]) -> str | None:
        if values.get("picked") and not (self.step_required and values.get("step") is None):
            return None
        self.query_one("#form-trace", OptionList).focus()
        return "pick a step first" if self.step_required else 'pick a step (or "no step") first'


class HintEditor(FormScreen):
    """Add a hint: type one, or edit the one shown (prefilled); the driver audits it and
    asks again at the next hint gate."""

    def __init__(self, title: str, context: Text | None = None, *, prefill: str = "") -> None:
        super().__init__(title, [("reason", "reason", "reason (journaled; optional)")], context=context,
                         editor="hint", editor_text=prefill, validate=self._hint_given)

    @staticmethod
    def _hint_given(values: dict[str, Any]) -> str | None:
        return None if str(values.get("editor") or "").strip() else "the hint is empty"


class VerdictForm(FormScreen):
    """Accept or reject an attempt: the checker values (unset = not judged) and a reason
    (required to reject)."""

    def __init__(self, title: str, context: Text | None = None, *, checker: tuple[str, ...], required: bool) -> None:
        placeholder = "reason (journaled)" + ("; required" if required else "; optional")
        super().__init__(title, [("reason", "reason", placeholder)], context=context, checker=checker,
                         validate=ReasonPrompt._reason_given if required else None)
