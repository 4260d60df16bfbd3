"""The built-in launcher plugins, one module per launcher type. Each registers through the
same ``distcomp_launchers`` hook a third-party plugin uses (see ``distcomp.core.hookspec``)."""
