"""The hint placement the driver used, learned from one of the run's own hinted requests.

The reference does not say how the driver puts a hint into the teacher's request. A run
that already tried a hint archives that teacher request (the hint try's runtime store,
§2.13) next to the unhinted failure-step request (the source store). Comparing the two
shows exactly what the driver added: a new message, or text put before / after the
text of an existing message, or a new text part; and the words around the hint.
:func:`infer_hint_template` returns that as a :class:`HintTemplate`;
:func:`apply_template` adds a different hint the same way. ``policy/request.py``'s
``apply_hint`` is still the one place a hint is inserted: with placement ``as_run`` it
applies the learned template and otherwise (no hinted request in the run) falls back to
``user_suffix``.

Only an unambiguous difference is accepted: one message added, or one message changed
by one insertion that contains the hint text exactly once; anything else gives ``None``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

NEW_MESSAGE = "new_message"
APPEND_TEXT = "append_text"
PREPEND_TEXT = "prepend_text"
NEW_PART = "new_part"


@dataclass(frozen=True)
class HintTemplate:
    """What the driver added around a hint, and where.

    - ``new_message``: a message of ``role`` inserted ``from_end`` positions before the end
      (0 = appended), its content the text (``list_content``: one text part);
    - ``append_text`` / ``prepend_text``: the text added after / before the text of the
      ``which`` (``first`` | ``last``) message of ``role`` (in its text part ``part_from_end``
      counted from the end when the content is a list);
    - ``new_part``: a text part inserted ``from_end`` positions before the end of that
      message's content list.

    The added text is ``before + hint + after``.
    """

    mode: str
    role: str
    before: str
    after: str
    which: str = "last"
    from_end: int = 0
    list_content: bool = False
    part_from_end: int | None = None
    evidence: str = ""

    def describe(self) -> str:
        where = {
            NEW_MESSAGE: f"a new {self.role} message" + (f" {self.from_end} from the end" if self.from_end else " at the end"),
            APPEND_TEXT: f"appended to the {self.which} {self.role} message",
            PREPEND_TEXT: f"put before the text of the {self.which} {self.role} message",
            NEW_PART: f"a new text part of the {self.which} {self.role} message",
        }.get(self.mode, self.mode)
        return f"{where}, as {self.before!r} + hint + {self.after!r}"

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode, "role": self.role, "which": self.which, "from_end": self.from_end,
            "list_content": self.list_content, "part_from_end": self.part_from_end,
            "before": self.before, "after": self.after, "evidence": self.evidence,
        }


def _split_around(text: str, hint: str) -> tuple[str, str] | None:
    """``text`` as ``before + hint + after`` when the hint occurs exactly once."""
    for needle in dict.fromkeys((hint, hint.strip())):
        if needle and text.count(needle) == 1:
            i = text.index(needle)
            return text[:i], text[i + len(needle):]
    return None


def _which(messages: list[dict[str, Any]], index: int) -> str | None:
    role = messages[index].get("role")
    same = [i for i, m in enumerate(messages) if m.get("role") == role]
    if same[-1] == index:
        return "last"
    if same[0] == index:
        return "first"
    return None


def _text_of(content: Any) -> tuple[str, bool] | None:
    """The text of a new message's content and whether it was a one-part list."""
    if isinstance(content, str):
        return content, False
    if isinstance(content, list) and len(content) == 1:
        part = content[0]
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            return part["text"], True
    return None


def infer_hint_template(source: list[dict[str, Any]], hinted: list[dict[str, Any]], hint: str, *, evidence: str = "") -> HintTemplate | None:
    """What turned ``source`` into ``hinted``, if it is one insertion holding ``hint``."""
    if not hint or not hint.strip():
        return None
    if len(hinted) == len(source) + 1:
        return _inserted_message(source, hinted, hint, evidence)
    if len(hinted) != len(source):
        return None
    changed = [k for k in range(len(source)) if source[k] != hinted[k]]
    if len(changed) != 1:
        return None
    k = changed[0]
    old, new = source[k], hinted[k]
    if {key: v for key, v in old.items() if key != "content"} != {key: v for key, v in new.items() if key != "content"}:
        return None
    which = _which(source, k)
    role = old.get("role")
    if which is None or not isinstance(role, str):
        return None
    a, b = old.get("content"), new.get("content")
    if isinstance(a, str) and isinstance(b, str):
        return _text_change(a, b, hint, role, which, None, evidence)
    if isinstance(a, list) and isinstance(b, list):
        return _changed_parts(a, b, hint, role, which, evidence)
    return None


def _inserted_message(source: list[dict[str, Any]], hinted: list[dict[str, Any]], hint: str, evidence: str) -> HintTemplate | None:
    """``hinted`` is ``source`` with one message more: that message holds the hint (and only it, role and content)."""
    for k in range(len(hinted)):
        if hinted[:k] + hinted[k + 1:] != source:
            continue
        added = hinted[k]
        got = _text_of(added.get("content"))
        parts = _split_around(got[0], hint) if got else None
        if got is None or parts is None or not isinstance(added.get("role"), str) or set(added) - {"role", "content"}:
            return None
        return HintTemplate(NEW_MESSAGE, added["role"], parts[0], parts[1], from_end=len(hinted) - 1 - k,
                            list_content=got[1], evidence=evidence)
    return None


def _changed_parts(a: list[Any], b: list[Any], hint: str, role: str, which: str, evidence: str) -> HintTemplate | None:
    """One message's content parts: one part added (a new text part), or one text part changed."""
    if len(b) == len(a) + 1:
        for j in range(len(b)):
            if b[:j] + b[j + 1:] != a:
                continue
            got = _text_of([b[j]])
            parts = _split_around(got[0], hint) if got else None
            if parts is None:
                return None
            return HintTemplate(NEW_PART, role, parts[0], parts[1], which=which, from_end=len(b) - 1 - j, evidence=evidence)
        return None
    if len(a) != len(b):
        return None
    diff = [j for j in range(len(a)) if a[j] != b[j]]
    if len(diff) != 1:
        return None
    j = diff[0]
    pa, pb = a[j], b[j]
    if not (isinstance(pa, dict) and isinstance(pb, dict) and pa.get("type") == pb.get("type") == "text"):
        return None
    if isinstance(pa.get("text"), str) and isinstance(pb.get("text"), str):
        return _text_change(pa["text"], pb["text"], hint, role, which, len(a) - 1 - j, evidence)
    return None


def _text_change(old: str, new: str, hint: str, role: str, which: str, part_from_end: int | None, evidence: str) -> HintTemplate | None:
    if new.startswith(old) and len(new) > len(old):
        parts = _split_around(new[len(old):], hint)
        mode = APPEND_TEXT
    elif new.endswith(old) and len(new) > len(old):
        parts = _split_around(new[: len(new) - len(old)], hint)
        mode = PREPEND_TEXT
    else:
        return None
    if parts is None:
        return None
    return HintTemplate(mode, role, parts[0], parts[1], which=which, part_from_end=part_from_end, evidence=evidence)


def apply_template(messages: list[dict[str, Any]], hint: str, template: HintTemplate) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """``messages`` with ``hint`` added as ``template`` says, and where it went (the same
    location shape as ``apply_hint``'s, plus ``mode``); ``None`` when these messages have
    no place for it (then the caller falls back to its default rule)."""
    msgs = copy.deepcopy(messages)
    text = template.before + hint.strip() + template.after
    loc: dict[str, Any] = {"placement": "as_run", "mode": template.mode, "role": template.role, "length": len(text)}
    if template.mode == NEW_MESSAGE:
        at = len(msgs) - template.from_end
        if at < 0:
            return None
        content: Any = [{"type": "text", "text": text}] if template.list_content else text
        msgs.insert(at, {"role": template.role, "content": content})
        loc.update(message_index=at, part_index=0 if template.list_content else None, char_offset=0)
        return msgs, loc
    same = [i for i, m in enumerate(msgs) if m.get("role") == template.role]
    if not same:
        return None
    i = same[-1] if template.which == "last" else same[0]
    msg = msgs[i]
    content = msg.get("content")
    if template.mode == NEW_PART:
        if not isinstance(content, list) or template.from_end > len(content):
            return None
        j = len(content) - template.from_end
        content.insert(j, {"type": "text", "text": text})
        loc.update(message_index=i, part_index=j, char_offset=0)
        return msgs, loc
    if template.part_from_end is None:
        if not isinstance(content, str):
            return None
        holder, key, part = msg, "content", None
    else:
        if not isinstance(content, list) or template.part_from_end >= len(content):
            return None
        part = len(content) - 1 - template.part_from_end
        holder, key = content[part], "text"
        if not isinstance(holder, dict) or not isinstance(holder.get("text"), str):
            return None
    old = holder[key]
    if template.mode == APPEND_TEXT:
        holder[key] = old + text
        loc.update(message_index=i, part_index=part, char_offset=len(old))
    else:
        holder[key] = text + old
        loc.update(message_index=i, part_index=part, char_offset=0)
    return msgs, loc


__all__ = ["HintTemplate", "apply_template", "infer_hint_template"]
