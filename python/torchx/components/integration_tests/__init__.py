"""End-to-end checks of the builtin components on a real scheduler, as TorchX's
``scripts/component_integration_tests.py`` drives them: ``component_provider`` builds the
AppDefs, ``integ_tests.IntegComponentTest`` runs them all and fails unless every one succeeds."""
