"""Testing composed trees: the composed-test environment, test runs and mutation.

testenv (the CPU test environment outside the repository, vLLM installed from the
composed core tree), testrun (run the plugin's pytest and judge what it recorded against
the known-failures list), mutation (revert each patch's change: its tests must fail).

May import: the foundation, overlay.series and overlay.trees. Nothing above it.
"""
