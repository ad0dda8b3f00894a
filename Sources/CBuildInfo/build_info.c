// The commit is injected at build time without breaking a plain `swift build`: scripts/stamp-build
// writes build_commit.h (git-ignored) defining MATCHER_GIT_COMMIT; without it the commit is "unknown".
#include "build_info.h"

#if __has_include("build_commit.h")
#include "build_commit.h"
#endif

#ifndef MATCHER_GIT_COMMIT
#define MATCHER_GIT_COMMIT "unknown"
#endif

const char *matcher_build_commit(void) { return MATCHER_GIT_COMMIT; }
