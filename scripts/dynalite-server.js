#!/usr/bin/env node
// dynalite-server.js: start dynalite (the pinned npm package, unmodified)
// the way its cli.js does, but survive clients that hang up mid-request.
//
// dynalite 4.0.0 throws from a request's 'error' handler
// (index.js: req.on('error', function (err) { throw err })), so any client
// that is killed, or cancels a request (a context deadline, a shutdown),
// while its body is in flight takes the whole server down with
// "Error: aborted". That is exactly what tidemark's fault tests do on
// purpose. Such an error concerns one connection only: log it and go on.
// Any other uncaught exception still ends the process.
'use strict'
const path = require('path')
const root = path.join(__dirname, '..', 'node_modules')
const argv = require(path.join(root, 'minimist'))(process.argv.slice(2))

process.on('uncaughtException', function (err) {
  const aborted = err && (err.code === 'ECONNRESET' || err.code === 'ECONNABORTED' || err.message === 'aborted')
  if (aborted) {
    console.error('dynalite-server: a client hung up mid-request (%s); continuing', err.message)
    return
  }
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})

const server = require(path.join(root, 'dynalite'))(argv)
  .listen(argv.port || 4567, argv.host || '127.0.0.1', function () {
    const address = server.address()
    console.log('Dynalite listening at: http://%s:%s', argv.host || '127.0.0.1', address.port)
  })
