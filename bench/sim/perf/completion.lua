-- wrk request for the simulator's throughput figure: a short completion.
wrk.method = "POST"
wrk.body = '{"model":"sim-model","prompt":"A short prompt for the simulator benchmark.","max_tokens":4}'
wrk.headers["Content-Type"] = "application/json"
