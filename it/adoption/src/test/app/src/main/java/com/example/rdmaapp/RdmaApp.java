package com.example.rdmaapp;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/** Publishes the "prices" region through the rdma4j starter and serves peers until stopped. */
@SpringBootApplication
public class RdmaApp {

    public static void main(String[] args) {
        SpringApplication.run(RdmaApp.class, args);
    }
}
