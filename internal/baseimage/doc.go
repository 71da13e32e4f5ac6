// Package baseimage builds the default base image of docker sandboxes on the
// machine itself, with no container registry: a Debian root filesystem made
// by debootstrap (variant minbase) from the host's apt mirror, holding what
// Daytona's default snapshot offers (bash, coreutils, python3 with pip, node
// and npm, git, curl, ca-certificates, procps and a daytona user), streamed
// as a tar into the engine's image import.
//
// Images are cached by content. A Spec's Hash covers everything that decides
// what the image holds (suite, architecture, packages, the setup script and
// a format version) but not the mirror, which decides only where packages
// come from; the image carries the hash as a label and a tag. Ensure returns
// the image with the hash when the engine has one and builds it otherwise,
// holding a file lock keyed by the hash in the temp directory while it
// builds, so that two daemons or two tests never build the same image at
// once: the second waits and finds the first one's image.
//
// Building needs root (debootstrap creates device nodes, sets ownership and
// runs maintainer scripts in a chroot) and downloads a few hundred packages:
// minutes, reported as progress lines. Without root it fails with
// preflight_failed naming the fix: run `sudo sandplane image build` once.
//
// LayerToolbox puts the sandplane binary on top of a base image with an
// engine build (FROM base, COPY), because an imported layer cannot have a
// parent: the result is the docker runtime's default toolbox image.
package baseimage
