#!/bin/sh
# Entry point of the gateway Lambda under the AWS Lambda Web Adapter (response_stream mode): the adapter forwards
# API Gateway requests to this uvicorn on $PORT (default 8080). Configuration comes from the environment
# (asya_gateway.config); the app is built by the factory, never at import.
exec python -m uvicorn asya_gateway.app:create_app --factory --host 0.0.0.0 --port "${PORT:-8080}"
