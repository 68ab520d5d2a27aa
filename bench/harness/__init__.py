"""What every bench suite shares: arrivals, the client, the runner, servers, results, plots."""
