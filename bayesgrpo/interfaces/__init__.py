"""Layer 4, what people see: figures, the HTML report, the command line and ``bayesgrpo watch``.

Sits beside ``bayesgrpo.integrations`` (the training-loop hooks) and imports only the layers below
it: see ``docs/ARCHITECTURE.md``.
"""
