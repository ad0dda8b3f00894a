#!/bin/bash
# Session 16's alternating first runs (../bench-2026-11-26-s16/ab.sh), resetting also the bulk list of
# migration 0012.  usage: ab.sh ROUNDS BIN_A BIN_B
here="$(cd "$(dirname "$0")" && pwd)"
RESET_SQL="$here/reset.sql" exec bash "$here/../bench-2026-11-26-s16/ab.sh" "$@"
