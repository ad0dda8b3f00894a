#ifndef MATCHER_BUILD_INFO_H
#define MATCHER_BUILD_INFO_H

/// The git commit the binary was built from: what scripts/stamp-build wrote into the git-ignored
/// build_commit.h beside build_info.c, or "unknown" (a plain `swift build`).
const char *matcher_build_commit(void);

#endif
