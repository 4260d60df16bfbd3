"""The target contract, where a plugin author imports it: ``from distcomp.target import
Compiled, TargetOption, TargetType``. It lives in the core (``distcomp.core.target``)."""

from .core.target import (JOB_NAME, Compiled, JobContext, Notify, OptionKind, Target, TargetOption,
                          TargetType)

__all__ = ["JOB_NAME", "Compiled", "JobContext", "Notify", "OptionKind", "Target", "TargetOption", "TargetType"]
