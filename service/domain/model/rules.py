"""The decider's rules version (shared/spec/audit.md, *Rules version*): the one place it is written.

Every decision records it in its data (`"rules": RULES`); a decision recorded without it reads as
rules 0. Raise it by one with every change that can alter any decision's data for some stream of
inputs (a placement, a victim, a reason code or number, a field added or removed, an order); a
change of wording only never raises it. docs/audit.md (*Rules versions*) lists every version with
what it changed, and tests/golden/expected.json names the kept streams a raise made diverge.
"""
from __future__ import annotations

RULES = 4
