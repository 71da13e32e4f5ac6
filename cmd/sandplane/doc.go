// Command sandplane is the one binary of the project: the local control plane
// daemon (serve), the Daytona API simulator (sim), the in-sandbox toolbox
// (toolbox), and the client commands.
package main
