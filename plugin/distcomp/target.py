"""The target contract, where a plugin author imports it: ``from distcomp.target import
Compiled, Target, TargetOption, TargetType`` (a target subclasses ``Target``; its ``compile``
gets the core's ``Plan``, its ``submit`` a ``JobContext``). It lives in the core
(``distcomp.core.target``)."""

from .core.target import (JOB_NAME, Compiled, JobContext, Notify, OptionKind, Target, TargetOption,
                          TargetType)

__all__ = ["JOB_NAME", "Compiled", "JobContext", "Notify", "OptionKind", "Target", "TargetOption", "TargetType"]
