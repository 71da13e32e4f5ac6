// Package webhooks delivers the simulator's events to HTTP receivers the
// way Daytona's webhook provider, Svix, delivers Daytona's: a POST of the
// event's JSON with the svix-id, svix-timestamp and svix-signature headers
// of Svix's published scheme (an HMAC-SHA256 of "id.timestamp.body" under
// the endpoint secret, base64, after "v1,"), so that a receiver verifies it
// with Svix's own libraries.
//
// A delivery that answers anything but 2xx, or nothing within the attempt
// timeout, is retried on Svix's schedule (5 s, 5 min, 30 min, 2 h, 5 h,
// 10 h, 10 h after the attempt before, shrunk by the simulator's minute),
// with the same svix-id and a new timestamp and signature each time; after
// the last, the message is failed. Every attempt is kept in a bounded log,
// newest last, for the admin API.
//
// A Fault hook lets a test make the provider misbehave as a receiver must
// survive: drop an attempt (the receiver never sees it; it is retried),
// delay it, or deliver it twice with one svix-id.
//
// Timers run on the injected clock; nothing here sleeps.
package webhooks
