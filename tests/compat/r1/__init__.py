"""A frozen copy of release 1's readers of what crosses a deploy (docs/protocol.md, "Compatibility"): the envelope
(``envelope.py``, from ``asya.envelope``), the compiled flow's state header (``flowstate.py``, from
``asya.flows.interp``) and the task items (``taskitem.py``, from ``asya.store.views``), and the goldens that release
wrote (``goldens/``). Never edit these files: a later release must read the goldens unchanged and must write nothing
these readers refuse (tests/unit/test_compat*.py, tests/functional/test_compat_tasks.py)."""
