"""The flow corpus: each module holds one flow (``@flow``), its actors as plain functions (``ACTORS``), a hypothesis
strategy of payloads (``payloads``) and, for a pause, the resume input (``RESUME``). Used by the equivalence test
(tests/unit/test_flow_equivalence.py) and the e2e test of the example flow."""
