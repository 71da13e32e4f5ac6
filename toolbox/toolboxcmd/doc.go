// Package toolboxcmd is the command line of the in-sandbox toolbox
// server: its flags, how it finds its token, its address and its
// entrypoint. Both `sandplane toolbox` and the small `sandplane-toolbox`
// program run it. It links the toolbox and nothing of the daemon or the
// simulator, so that the small program starts in the time of the toolbox's
// own start-up, which every native sandbox waits for, rather than paying
// the initialisation of every package of the sandplane binary.
package toolboxcmd
