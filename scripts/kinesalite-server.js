#!/usr/bin/env node
// kinesalite-server.js: start kinesalite (the pinned npm package,
// unmodified) the way its cli.js does, but bound to the given host
// (kinesalite's cli.js listens on every interface; tests bind 127.0.0.1
// only). Options: --host (default 127.0.0.1), --port, and kinesalite's own
// (--createStreamMs, --deleteStreamMs, --updateStreamMs, --shardLimit,
// --path).
//
// SIGUSR2 moves the server's clock forward by 5 minutes and 1 second.
// kinesalite's shard iterators expire 5 minutes after they were handed
// out, measured with the server's clock, so every iterator issued before
// the signal is then expired, exactly as when a consumer pauses for longer
// than that; iterators issued afterwards are valid for 5 minutes as usual.
// Tests use it to expire iterators without waiting.
//
// SIGHUP moves the clock forward by 25 hours, past the shortest retention
// period (24 hours): every record put before the signal is trimmed
// (kinesalite skips records older than the retention when it reads, so a
// GetRecords over them answers an empty page with a NextShardIterator
// behind the head), and every earlier iterator is expired.
//
// kinesalite 3.3.3, like dynalite, throws from a request's 'error' handler
// (index.js: req.on('error', function(err) { throw err })), so a client
// killed mid-request would take the server down with "Error: aborted".
// Such an error concerns one connection only: log it and go on. Any other
// uncaught exception still ends the process.
'use strict'
const path = require('path')
const root = path.join(__dirname, '..', 'node_modules')
const argv = require(path.join(root, 'minimist'))(process.argv.slice(2))

process.on('uncaughtException', function (err) {
  const aborted = err && (err.code === 'ECONNRESET' || err.code === 'ECONNABORTED' || err.message === 'aborted')
  if (aborted) {
    console.error('kinesalite-server: a client hung up mid-request (%s); continuing', err.message)
    return
  }
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})

let offset = 0
const realNow = Date.now
Date.now = function () { return realNow() + offset }
process.on('SIGUSR2', function () {
  offset += 5 * 60 * 1000 + 1000
  console.log('kinesalite-server: clock moved forward to %s: earlier shard iterators are expired', new Date(Date.now()).toISOString())
})

process.on('SIGHUP', function () {
  offset += 25 * 60 * 60 * 1000
  console.log('kinesalite-server: clock moved forward 25 hours to %s: earlier records are past the retention', new Date(Date.now()).toISOString())
})

const host = argv.host || '127.0.0.1'
const server = require(path.join(root, 'kinesalite'))(argv)
  .listen(argv.port || 4567, host, function () {
    const address = server.address()
    console.log('Kinesalite listening at: http://%s:%s', address.address, address.port)
  })
