#!/bin/sh
# A rank that leaves children behind: sleep 301..304, each in a session of its own, orphaned.
for n in 1 2; do
    DISTCOMP_TEST_ESCAPE="$1" setsid sh -c "sleep $((300 + 2 * RANK + n)) & exit 0"
done
echo "rank $RANK left sleep $((301 + 2 * RANK)) and $((302 + 2 * RANK))"
