"""Small helpers every layer uses, importing nothing of distcomp above them: files written whole
(``files``), what of a code folder travels (``codefolder``, ``ignore``), where registries are
(``stores``), places distcomp never writes (``places``), the masking rule (``redact``), lazy
package attributes (``lazy``) and the launcher names the spec layer is handed (``launchernames``)."""
